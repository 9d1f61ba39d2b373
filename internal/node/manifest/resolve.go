package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/platform"
)

// Selector picks platforms by dimension. Within a dimension the values are
// alternatives (tee: [snp, tdx] serves SNP or TDX platforms); across
// dimensions all must hold; an absent dimension serves every value. GPU and
// Debug, when set, must equal the platform's variant.
type Selector struct {
	// Distribution lists Kubernetes distributions (canonical names).
	Distribution []string `json:"distribution,omitempty"`
	// Hypervisor lists hypervisors: qemu, cloud-hypervisor, firecracker,
	// dragonball, stratovirt, openvmm, remote.
	Hypervisor []string `json:"hypervisor,omitempty"`
	// KataRuntime lists Kata runtimes: go, rust (the shim of each).
	KataRuntime []string `json:"kataRuntime,omitempty"`
	// TEE lists TEEs: none, snp, tdx.
	TEE []string `json:"tee,omitempty"`
	// ProductLine lists SNP product lines: milan, genoa, turin. A platform
	// that pins none matches no product line.
	ProductLine []string `json:"productLine,omitempty"`
	// Snapshotter lists snapshotters: overlayfs, nydus, devmapper, blockfile,
	// erofs.
	Snapshotter []string `json:"snapshotter,omitempty"`
	// GPU, when set, must equal whether the platform passes a GPU through.
	GPU *bool `json:"gpu,omitempty"`
	// Debug, when set, must equal whether the platform uses debug images.
	Debug *bool `json:"debug,omitempty"`
}

// dimensionKeys are the keys a serves mapping may have.
func dimensionKeys() []string {
	return []string{"distribution", "hypervisor", "kataRuntime", "tee", "productLine", "snapshotter", "gpu", "debug"}
}

// canonical parses value v of list dimension key into its canonical name.
func canonical(key, v string) (string, error) {
	switch key {
	case "distribution":
		d, err := platform.ParseDistribution(v)
		return d.String(), err
	case "hypervisor":
		h, err := platform.ParseHypervisor(v)
		return h.String(), err
	case "kataRuntime":
		r, err := platform.ParseKataRuntime(v)
		return r.String(), err
	case "tee":
		t, err := platform.ParseTEE(v)
		return t.String(), err
	case "productLine":
		p, err := platform.ParseProductLine(v)
		if err == nil && !p.Pinned() {
			return "", fmt.Errorf("%q is not a product line: list milan, genoa or turin, or leave productLine out to serve all", v)
		}
		return p.String(), err
	case "snapshotter":
		s, err := platform.ParseSnapshotter(v)
		return s.String(), err
	}
	return "", fmt.Errorf("unknown dimension %s", key)
}

func (s *Selector) list(key string) *[]string {
	switch key {
	case "distribution":
		return &s.Distribution
	case "hypervisor":
		return &s.Hypervisor
	case "kataRuntime":
		return &s.KataRuntime
	case "tee":
		return &s.TEE
	case "productLine":
		return &s.ProductLine
	case "snapshotter":
		return &s.Snapshotter
	}
	return nil
}

// parseSelector reads a serves mapping: each list dimension takes a string
// or a list of strings, gpu and debug take a boolean.
func parseSelector(raw json.RawMessage, at string) (Selector, error) {
	var s Selector
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return s, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, fmt.Errorf("%s: expected a mapping of dimension to value(s), e.g. {tee: [snp, tdx]}", at)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, kat := m[k], at+"."+k
		switch k {
		case "gpu", "debug":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return s, fmt.Errorf("%s: expected true or false", kat)
			}
			if k == "gpu" {
				s.GPU = &b
			} else {
				s.Debug = &b
			}
			continue
		}
		dst := s.list(k)
		if dst == nil {
			return s, fmt.Errorf("%s: unknown dimension: expected one of %s", kat, strings.Join(dimensionKeys(), ", "))
		}
		var vals []string
		var one string
		if err := json.Unmarshal(v, &one); err == nil {
			vals = []string{one}
		} else if err := json.Unmarshal(v, &vals); err != nil || len(vals) == 0 {
			return s, fmt.Errorf("%s: expected a value or a non-empty list of values", kat)
		}
		for i, val := range vals {
			c, err := canonical(k, val)
			if err != nil {
				return s, fmt.Errorf("%s[%d]: %w", kat, i, err)
			}
			if !slices.Contains(*dst, c) {
				*dst = append(*dst, c)
			}
		}
	}
	return s, nil
}

// Matches reports whether the selector serves p.
func (s Selector) Matches(p platform.Platform) bool {
	in := func(vals []string, v string) bool { return len(vals) == 0 || slices.Contains(vals, v) }
	return in(s.Distribution, p.Distribution().String()) &&
		in(s.Hypervisor, p.Hypervisor().String()) &&
		in(s.KataRuntime, p.KataRuntime().String()) &&
		in(s.TEE, p.TEE().String()) &&
		in(s.ProductLine, p.ProductLine().String()) &&
		in(s.Snapshotter, p.Snapshotter().String()) &&
		(s.GPU == nil || *s.GPU == p.GPU()) &&
		(s.Debug == nil || *s.Debug == p.Debug())
}

// IsZero reports whether the selector serves every platform.
func (s Selector) IsZero() bool {
	return len(s.Distribution)+len(s.Hypervisor)+len(s.KataRuntime)+len(s.TEE)+len(s.ProductLine)+len(s.Snapshotter) == 0 &&
		s.GPU == nil && s.Debug == nil
}

// Matches reports whether the component serves p: all its dimensions match.
func (c Component) Matches(p platform.Platform) bool { return c.Serves.Matches(p) }

// Resolve returns the components platform p needs, in manifest order. Two of
// them installing the same path is an error: the manifest would make the
// installer overwrite one with the other.
func (m *Manifest) Resolve(p platform.Platform) ([]Component, error) {
	var out []Component
	owner := map[string]string{}
	for _, c := range m.Components {
		if !c.Matches(p) {
			continue
		}
		for _, ip := range c.InstallPaths() {
			if o, dup := owner[ip]; dup {
				return nil, fmt.Errorf("manifest %s: platform %s: components %s and %s both install %s: narrow their serves", m.source, p, o, c.Name, ip)
			}
			owner[ip] = c.Name
		}
		out = append(out, c)
	}
	return out, nil
}

// Installable is Resolve for installing p: need are the files (relative
// to the prefix) that p's runtime configuration points at, such as the
// shim of its Kata runtime and its hypervisor binary; a manifest whose
// components install none of them for p is refused, since the platform
// would be "installed" and then fail at the first pod.
func (m *Manifest) Installable(p platform.Platform, need []string) ([]Component, error) {
	out, err := m.Resolve(p)
	if err != nil {
		return nil, err
	}
	for _, n := range need {
		if !slices.ContainsFunc(out, func(c Component) bool { return slices.Contains(c.InstallPaths(), n) }) {
			return nil, fmt.Errorf("manifest %s: platform %s needs %s, which no component serving it installs: add one", m.source, p, n)
		}
	}
	return out, nil
}

// Boot is what a confidential platform measures at launch.
type Boot struct {
	Firmware Component  `json:"firmware"`
	Kernel   Component  `json:"kernel"`
	Initrd   *Component `json:"initrd,omitempty"`
	Cmdline  string     `json:"kernelCmdline"`
}

// Boot picks the measured boot components of confidential platform p from
// the components Resolve returns: exactly one firmware, exactly one kernel,
// at most one initrd, and the command line of the one measured entry that
// serves p. Anything else is an error naming the candidates.
func (m *Manifest) Boot(p platform.Platform) (*Boot, error) {
	if !p.Confidential() {
		return nil, fmt.Errorf("platform %s has no TEE: only confidential platforms have a measured boot", p)
	}
	cs, err := m.Resolve(p)
	if err != nil {
		return nil, err
	}
	byRole := map[Role][]Component{}
	for _, c := range cs {
		if c.Role.Measured() {
			byRole[c.Role] = append(byRole[c.Role], c)
		}
	}
	one := func(r Role, optional bool) (*Component, error) {
		got := byRole[r]
		switch {
		case len(got) == 1:
			return &got[0], nil
		case len(got) == 0 && optional:
			return nil, nil
		case len(got) == 0:
			return nil, fmt.Errorf("manifest %s: no component with role %s serves platform %s: add one whose serves matches it", m.source, r, p)
		}
		names := make([]string, len(got))
		for i, c := range got {
			names[i] = c.Name
		}
		return nil, fmt.Errorf("manifest %s: platform %s is served by %d components with role %s (%s): expected exactly one; narrow their serves",
			m.source, p, len(got), r, strings.Join(names, ", "))
	}
	b := &Boot{}
	fw, err := one(RoleFirmware, false)
	if err != nil {
		return nil, err
	}
	k, err := one(RoleKernel, false)
	if err != nil {
		return nil, err
	}
	if b.Initrd, err = one(RoleInitrd, true); err != nil {
		return nil, err
	}
	b.Firmware, b.Kernel = *fw, *k
	var cmd []int
	for i, e := range m.Measured {
		if e.Serves.Matches(p) {
			cmd = append(cmd, i)
		}
	}
	switch len(cmd) {
	case 0:
		return nil, fmt.Errorf("manifest %s: no measured entry serves platform %s: add one with its kernelCmdline", m.source, p)
	case 1:
		b.Cmdline = m.Measured[cmd[0]].KernelCmdline
	default:
		return nil, fmt.Errorf("manifest %s: platform %s is served by measured entries %v: expected exactly one kernelCmdline; narrow their serves", m.source, p, cmd)
	}
	return b, nil
}

// Plan is what installing the manifest for one platform takes: the future
// berth install --dry-run.
type Plan struct {
	Platform   string      `json:"platform"`
	Manifest   string      `json:"manifest"`
	Version    string      `json:"version"`
	Digest     string      `json:"digest"`
	Components []Component `json:"components"`
	// Bytes is the download size of Components; AllBytes that of every
	// component in the manifest.
	Bytes    int64 `json:"bytes"`
	AllBytes int64 `json:"allBytes"`
	// Boot is set for confidential platforms whose measured boot resolves.
	Boot *Boot `json:"boot,omitempty"`
}

// Plan resolves the manifest for p and totals the downloads.
func (m *Manifest) Plan(p platform.Platform) (*Plan, error) {
	cs, err := m.Resolve(p)
	if err != nil {
		return nil, err
	}
	pl := &Plan{Platform: p.String(), Manifest: m.Name, Version: m.Version, Digest: m.digest, Components: cs, AllBytes: m.Bytes()}
	for _, c := range cs {
		pl.Bytes += c.Size
	}
	if p.Confidential() {
		if pl.Boot, err = m.Boot(p); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// Bytes is the download size of every component.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, c := range m.Components {
		n += c.Size
	}
	return n
}
