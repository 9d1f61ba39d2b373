package runtimecfg

import (
	"strings"
	"testing"
)

func TestParseKataGuest(t *testing.T) {
	str := func(p *string) string {
		if p == nil {
			return "<unset>"
		}
		return *p
	}
	main := `[hypervisor.qemu]
path = "/opt/kata/bin/qemu-system-x86_64"
kernel = "/opt/kata/share/kata-containers/vmlinuz.container"
image = "/opt/kata/share/kata-containers/kata-containers-confidential.img"
`
	for _, tc := range []struct {
		name, main, dropIn        string
		hv, kernel, image, initrd string
		errHas                    string
	}{
		{name: "main only", main: main, hv: "qemu",
			kernel: "/opt/kata/share/kata-containers/vmlinuz.container", image: "/opt/kata/share/kata-containers/kata-containers-confidential.img", initrd: "<unset>"},
		{name: "drop-in overrides the image", main: main, dropIn: "[hypervisor.qemu]\nimage = \"/opt/nv/kata-containers-nvidia-gpu-confidential.img\"\n", hv: "qemu",
			kernel: "/opt/kata/share/kata-containers/vmlinuz.container", image: "/opt/nv/kata-containers-nvidia-gpu-confidential.img", initrd: "<unset>"},
		{name: "drop-in without hypervisor keeps all", main: main, dropIn: "[runtime]\nenable_debug = true\n", hv: "qemu",
			kernel: "/opt/kata/share/kata-containers/vmlinuz.container", image: "/opt/kata/share/kata-containers/kata-containers-confidential.img", initrd: "<unset>"},
		{name: "no hypervisor section", main: "[runtime]\n", kernel: "<unset>", image: "<unset>", initrd: "<unset>"},
		{name: "wrong type names file, line and key", main: "[hypervisor.qemu]\nkernel = 1\n", errHas: "configuration.toml:2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := ParseKataGuest("configuration.toml", []byte(tc.main))
			if err == nil && tc.dropIn != "" {
				var d KataGuest
				if d, err = ParseKataGuest("config.d/10.toml", []byte(tc.dropIn)); err == nil {
					g = g.Merge(d)
				}
			}
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Hypervisor != tc.hv || str(g.Kernel) != tc.kernel || str(g.Image) != tc.image || str(g.Initrd) != tc.initrd {
				t.Fatalf("= %s %s %s %s; want %s %s %s %s", g.Hypervisor, str(g.Kernel), str(g.Image), str(g.Initrd), tc.hv, tc.kernel, tc.image, tc.initrd)
			}
		})
	}
}

// FuzzKataGuest checks that no Kata configuration makes the guest reader
// panic, that its errors name the file, and that merging is total.
func FuzzKataGuest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseKataGuest("configuration.toml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "configuration.toml") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		g.Merge(g)
	})
}
