package cli

import (
	"strings"
	"testing"

	"berth.dev/berth/platform"
)

// TestKataFlagsPerPlatform: the node-installer's and install's parsing of
// the Kata options: each key goes to its platform or custom runtime, a key
// naming neither is refused, and a custom runtime's base must be installed.
func TestKataFlagsPerPlatform(t *testing.T) {
	parse := func(s string) platform.Platform {
		p, err := platform.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	plats := []platform.Platform{parse("kubeadm-qemu-none"), parse("kubeadm-qemu-snp")}
	k := KataFlags{
		InlineDropIns: []string{"kata-big=[hypervisor.qemu]\ndefault_memory = 8192\n", "kubeadm-qemu-snp=[hypervisor.qemu]\ndefault_vcpus = 2\n"},
		HTTPSProxies:  []string{"kubeadm-qemu-none=http://p:3128"},
		Annotations:   []string{"kubeadm-qemu-snp=default_memory, default_vcpus"},
	}
	customs, err := k.ParseCustomRuntimes([]string{"kata-big=kubeadm-qemu-none"}, plats)
	if err != nil {
		t.Fatal(err)
	}
	if len(customs) != 1 || customs[0].Name != "kata-big" || !strings.Contains(string(customs[0].Kata.DropIn), "8192") || customs[0].Kata.HTTPSProxy != "" {
		t.Errorf("custom runtimes: %+v", customs)
	}
	per, err := k.PerPlatform(plats, []string{"kata-big"})
	if err != nil {
		t.Fatal(err)
	}
	none, snp := per["kubeadm-qemu-none"], per["kubeadm-qemu-snp"]
	if none.HTTPSProxy != "http://p:3128" || none.DropIn != nil || snp.DropIn == nil || strings.Join(snp.Annotations, ",") != "default_memory,default_vcpus" {
		t.Errorf("per platform: %+v", per)
	}
	for _, tc := range []struct {
		name    string
		k       KataFlags
		customs []string
		want    string
	}{
		{"key names nothing configured", KataFlags{HTTPSProxies: []string{"kubeadm-qemu-tdx=http://p:1"}}, nil, "not a platform (or custom runtime) this command configures"},
		{"no key", KataFlags{NoProxies: []string{"localhost"}}, nil, "expected PLATFORM=VALUE"},
		{"two drop-ins for one platform", KataFlags{DropIns: []string{"kubeadm-qemu-none=/dev/null"}, InlineDropIns: []string{"kubeadm-qemu-none=x"}}, nil, "--kata-drop-in given twice"},
		{"base not installed", KataFlags{}, []string{"big=kubeadm-qemu-tdx"}, "must be one of those installed"},
		{"base unknown", KataFlags{}, []string{"big=kubeadm-qemu-nope"}, "--custom-runtime big: base platform"},
		{"custom name invalid", KataFlags{}, []string{"Big=kubeadm-qemu-none"}, "lower-case"},
		{"custom runtime twice", KataFlags{}, []string{"big=kubeadm-qemu-none", "big=kubeadm-qemu-snp"}, "given twice"},
		{"custom drop-in bad", KataFlags{InlineDropIns: []string{"big=[hypervisor.qemu]\nx = 1\n"}}, []string{"big=kubeadm-qemu-none"}, "hypervisor.qemu.x is not a key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.customs != nil {
				_, err = tc.k.ParseCustomRuntimes(tc.customs, plats)
			} else {
				_, err = tc.k.PerPlatform(plats, nil)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
