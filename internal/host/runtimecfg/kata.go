package runtimecfg

import (
	"maps"
	"slices"
)

// KataGuest is what one Kata configuration file (or drop-in) says about
// the guest it boots: the kernel, image and initrd of its hypervisor
// section. A nil field is one the file does not set, so that drop-ins
// merge over the main file key by key.
type KataGuest struct {
	// Hypervisor is the name of the [hypervisor.<name>] section.
	Hypervisor string
	Kernel     *string
	Image      *string
	Initrd     *string
}

// ParseKataGuest reads the guest paths of a Kata configuration. A file
// with several hypervisor sections (Kata's templates have one) answers
// for the first by name; one with none answers with an empty Hypervisor.
func ParseKataGuest(file string, data []byte) (KataGuest, error) {
	var doc struct {
		Hypervisor map[string]struct {
			Kernel *string `toml:"kernel"`
			Image  *string `toml:"image"`
			Initrd *string `toml:"initrd"`
		} `toml:"hypervisor"`
	}
	if err := decode(file, data, &doc); err != nil {
		return KataGuest{}, err
	}
	if len(doc.Hypervisor) == 0 {
		return KataGuest{}, nil
	}
	name := slices.Sorted(maps.Keys(doc.Hypervisor))[0]
	h := doc.Hypervisor[name]
	return KataGuest{Hypervisor: name, Kernel: h.Kernel, Image: h.Image, Initrd: h.Initrd}, nil
}

// Merge lays over on top of g, as Kata reads its config.d drop-ins after
// the main file: a key over sets wins.
func (g KataGuest) Merge(over KataGuest) KataGuest {
	if over.Hypervisor != "" {
		g.Hypervisor = over.Hypervisor
	}
	for _, p := range []struct{ dst, src **string }{{&g.Kernel, &over.Kernel}, {&g.Image, &over.Image}, {&g.Initrd, &over.Initrd}} {
		if *p.src != nil {
			*p.dst = *p.src
		}
	}
	return g
}
