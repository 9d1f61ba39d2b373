package discover

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"berth.dev/berth/bench/benchhost"
	"berth.dev/berth/internal/facts"
	"berth.dev/berth/internal/hostfs"
)

// TestVFAddresses lays out virtual functions from the PF's routing ID,
// offset and stride, and gives none without a usable offset.
func TestVFAddresses(t *testing.T) {
	tests := []struct {
		name, addr, offset, stride string
		n                          int
		want                       []string
	}{
		{"ConnectX, same bus", "0000:3b:00.0", "2\n", "1\n", 3, []string{"0000:3b:00.2", "0000:3b:00.3", "0000:3b:00.4"}},
		{"next bus", "0001:c1:00.0", "256\n", "1\n", 2, []string{"0001:c2:00.0", "0001:c2:00.1"}},
		{"stride 2 across a device", "0000:01:00.1", "7\n", "2\n", 3, []string{"0000:01:01.0", "0000:01:01.2", "0000:01:01.4"}},
		{"past bus ff", "0000:ff:1f.6", "1\n", "1\n", 3, []string{"0000:ff:1f.7"}},
		// Intel VMD puts its devices in domains from 10000 up.
		{"VMD domain", "10000:e0:00.0", "8\n", "1\n", 2, []string{"10000:e0:01.0", "10000:e0:01.1"}},
		{"no offset file", "0000:3b:00.0", "", "1\n", 3, nil},
		{"zero offset", "0000:3b:00.0", "0\n", "1\n", 3, nil},
		{"none enabled", "0000:3b:00.0", "2\n", "1\n", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"pf/sriov_stride": tt.stride}
			if tt.offset != "" {
				files["pf/sriov_offset"] = tt.offset
			}
			writeTree(t, dir, files)
			root, err := hostfs.OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			h := hostfs.OpenDirHandle(root.FS(), "pf")
			defer h.Close()
			got := vfAddresses(h, tt.addr, tt.n)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestPCIAddress holds pciAddress to the fmt format it replaces, over
// domains of one to five digits and every routing ID's boundaries.
func TestPCIAddress(t *testing.T) {
	for _, dom := range []int{0, 1, 0xf, 0x10, 0xabc, 0xffff, 0x10000, 0x1ffff} {
		for _, rid := range []int{0, 1, 7, 8, 0xff, 0x100, 0x1234, 0xfff8, 0xffff} {
			want := fmt.Sprintf("%04x:%02x:%02x.%x", dom, rid>>8, (rid>>3)&0x1f, rid&7)
			if got := pciAddress(dom, rid); got != want {
				t.Errorf("pciAddress(%#x, %#x) = %q, want %q", dom, rid, got, want)
			}
			if d, r, ok := parsePCIAddress(want); !ok || d != dom || r != rid {
				t.Errorf("parsePCIAddress(%q) = %#x, %#x, %v", want, d, r, ok)
			}
		}
	}
	for _, bad := range []string{"", "0000:3b:00", "000:3b:00.0", "0000:3b:00.8", "0000:3b:20.0", "0000:3g:00.0", "0000:3b:00.0.1", "0000:-1:00.0"} {
		if _, _, ok := parsePCIAddress(bad); ok {
			t.Errorf("parsePCIAddress(%q) accepted", bad)
		}
	}
}

// TestPCIVirtualFunctionNUMA reads the generated GPU node and checks that
// every function has the NUMA node its sysfs numa_node holds, whether it
// was read (PFs and other functions) or taken from its PF (VFs).
func TestPCIVirtualFunctionNUMA(t *testing.T) {
	dir := t.TempDir()
	sum, err := benchhost.Write(dir, benchhost.Base())
	if err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{root: root}
	var f facts.Facts
	runPCI(context.Background(), s, &f)
	if len(f.PCI) != sum.Functions || len(s.unknown) != 0 {
		t.Fatalf("%d functions, want %d; unknown %v", len(f.PCI), sum.Functions, s.unknown)
	}
	nodes := map[int]bool{}
	for _, d := range f.PCI {
		want, ok := s.readInt(pciDevicesDir + "/" + d.Address + "/numa_node")
		if !ok || d.NUMANode == nil || *d.NUMANode != want {
			t.Fatalf("%s: NUMA node %v, numa_node holds %d", d.Address, d.NUMANode, want)
		}
		nodes[want] = true
	}
	if got := slices.Sorted(maps.Keys(nodes)); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("NUMA nodes %v, want both of the generated host's", got)
	}
}
