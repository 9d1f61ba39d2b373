package nodeinstall

import (
	"path"
	"strings"

	"berth.dev/berth/internal/node/manifest"
)

// UseMirror puts an in-cluster mirror first among every component's
// sources: <mirror>/sha256/<hex>, then <mirror>/<file name>, then the
// manifest's own URLs. The manifest's digests are still checked, so the
// mirror is trusted for nothing but availability.
func UseMirror(m *manifest.Manifest, mirror string) {
	base := strings.TrimSuffix(mirror, "/")
	for i := range m.Components {
		c := &m.Components[i]
		srcs := []string{base + "/sha256/" + c.SHA256}
		name := c.Name
		if len(c.Sources) > 0 {
			name = path.Base(c.Sources[0])
		}
		srcs = append(srcs, base+"/"+name)
		c.Sources = append(srcs, c.Sources...)
	}
}
