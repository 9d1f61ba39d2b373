package configure

import (
	"path"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"berth.dev/berth/platform"
)

// TestGPUGuestMatchesKataConfig holds platform.GPUGuest, which the
// gpu.guest.image check compares installed configurations with, to the
// kernel and image berth's own configuration of every GPU platform boots
// (which TestKataConfigConformance holds to Kata 4.1's templates).
func TestGPUGuestMatchesKataConfig(t *testing.T) {
	ps := Paths{Prefix: DefaultPrefix}
	n := 0
	for _, p := range platform.All() {
		kernel, image, ok := p.GPUGuest()
		if !ok {
			continue
		}
		n++
		var doc struct {
			Hypervisor map[string]struct {
				Kernel string `toml:"kernel"`
				Image  string `toml:"image"`
			} `toml:"hypervisor"`
		}
		if err := toml.Unmarshal(KataConfig(p, ps), &doc); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		h, found := doc.Hypervisor[p.KataSection()]
		if !found {
			t.Fatalf("%s: no [hypervisor.%s] in its configuration", p, p.KataSection())
		}
		if path.Base(h.Kernel) != kernel || path.Base(h.Image) != image {
			t.Errorf("%s: configuration boots kernel %s, image %s; GPUGuest says %s, %s", p, h.Kernel, h.Image, kernel, image)
		}
	}
	if n == 0 {
		t.Fatal("no GPU platform in platform.All()")
	}
}
