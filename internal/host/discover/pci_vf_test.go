package discover

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"berth.dev/berth/bench/benchhost"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
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
	var unknown []facts.Missing
	for _, m := range s.unknown {
		// The GPUs' CC modes and VBIOS versions are unknown offline
		// (gpucc_test.go); nothing else may be.
		if !strings.HasPrefix(m.Field, "gpus") {
			unknown = append(unknown, m)
		}
	}
	if len(f.PCI) != sum.Functions || len(unknown) != 0 {
		t.Fatalf("%d functions, want %d; unknown %v", len(f.PCI), sum.Functions, unknown)
	}
	nodes := map[int]bool{}
	for _, d := range f.PCI {
		v, ok := s.readString("", pciDevicesDir+"/"+d.Address+"/numa_node")
		want, err := strconv.Atoi(v)
		if !ok || err != nil || d.NUMANode == nil || *d.NUMANode != want {
			t.Fatalf("%s: NUMA node %v, numa_node holds %d", d.Address, d.NUMANode, want)
		}
		nodes[want] = true
	}
	if got := slices.Sorted(maps.Keys(nodes)); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("NUMA nodes %v, want both of the generated host's", got)
	}
}

// TestResolveVFs holds the VF rule to its cases: in address order, a
// function listed by an earlier function that is not a VF is a VF, loses
// any SR-IOV fields of its own, and its list is not followed; a function
// read without its SR-IOV files because a VF listed it is read again.
func TestResolveVFs(t *testing.T) {
	addrs := []string{"0000:01:00.0", "0000:01:00.1", "0000:01:00.2", "0000:01:00.3", "0000:02:00.0"}
	n5 := 5
	tests := []struct {
		name     string
		ok       []bool
		vfs      [][]string
		skipped  []bool
		sriov    []bool // the function has SR-IOV fields as read
		reread   map[int][]string
		wantPF   []int
		wantRead []int
		wantSR   []bool // SR-IOV fields left
	}{{
		name:    "a PF and its VFs, read without their SR-IOV files",
		ok:      []bool{true, true, true, true, true},
		vfs:     [][]string{{addrs[1], addrs[2]}, nil, nil, nil, nil},
		skipped: []bool{false, true, true, false, false},
		sriov:   []bool{true, false, false, false, false},
		wantPF:  []int{-1, 0, 0, -1, -1},
		wantSR:  []bool{true, false, false, false, false},
	}, {
		name:    "a VF read whole before it was known loses its fields and its list",
		ok:      []bool{true, true, true, true, true},
		vfs:     [][]string{{addrs[1]}, {addrs[3]}, nil, nil, nil},
		skipped: []bool{false, false, false, false, false},
		sriov:   []bool{true, true, false, false, false},
		wantPF:  []int{-1, 0, -1, -1, -1},
		wantSR:  []bool{true, false, false, false, false},
	}, {
		name:     "a function a VF listed, read without its files, is read again",
		ok:       []bool{true, true, true, true, true},
		vfs:      [][]string{{addrs[1]}, {addrs[3]}, nil, nil, nil},
		skipped:  []bool{false, false, false, true, false},
		sriov:    []bool{true, true, false, false, false},
		reread:   map[int][]string{3: {addrs[4]}},
		wantPF:   []int{-1, 0, -1, -1, 3},
		wantRead: []int{3},
		wantSR:   []bool{true, false, false, false, false},
	}, {
		name:    "lists backwards, of itself, of unknown or unread functions",
		ok:      []bool{true, true, false, true, true},
		vfs:     [][]string{{addrs[0], "0000:09:00.0"}, nil, nil, {addrs[1], addrs[2]}, nil},
		skipped: []bool{false, false, false, false, false},
		sriov:   []bool{true, false, false, true, false},
		wantPF:  []int{-1, -1, -1, -1, -1},
		wantSR:  []bool{true, false, false, true, false},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := make([]facts.PCIDevice, len(addrs))
			at := map[string]int{}
			for i, a := range addrs {
				all[i].Address = a
				at[a] = i
				if tt.sriov[i] {
					all[i].SRIOVTotal, all[i].SRIOVNum = &n5, &n5
				}
			}
			vfs := slices.Clone(tt.vfs)
			var read []int
			pfOf := resolveVFs(all, tt.ok, vfs, tt.skipped, at, func(i int) []string {
				read = append(read, i)
				return tt.reread[i]
			})
			if !slices.Equal(pfOf, tt.wantPF) {
				t.Errorf("pfOf %v, want %v", pfOf, tt.wantPF)
			}
			if !slices.Equal(read, tt.wantRead) {
				t.Errorf("read again %v, want %v", read, tt.wantRead)
			}
			for i, d := range all {
				if has := d.SRIOVTotal != nil || d.SRIOVNum != nil; has != tt.wantSR[i] {
					t.Errorf("%s: SR-IOV fields %v, want %v", d.Address, has, tt.wantSR[i])
				}
			}
		})
	}
}

// TestPCIVFRuleAnyTiming reads a tree where a VF has SR-IOV files of its
// own (no kernel shows them; a fixture can), listing a function its PF
// does not. Whichever function a worker reaches first, the answer is the
// rule's: the VF has its PF's node and no SR-IOV fields, and the function
// it lists is no VF, with its own node and SR-IOV fields.
func TestPCIVFRuleAnyTiming(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	fn := func(addr, numa string, kv ...string) {
		d := pciDevicesDir + "/" + addr + "/"
		files[d+"uevent"] = "DRIVER=x\nPCI_CLASS=20000\nPCI_ID=15B3:101E\n"
		files[d+"numa_node"] = numa + "\n"
		for i := 0; i < len(kv); i += 2 {
			files[d+kv[i]] = kv[i+1] + "\n"
		}
	}
	sriov := func(total, num, offset string) []string {
		return []string{"sriov_totalvfs", total, "sriov_numvfs", num, "sriov_offset", offset, "sriov_stride", "1"}
	}
	fn("0000:01:00.0", "1", sriov("4", "2", "1")...) // VFs 01:00.1 and 01:00.2
	fn("0000:01:00.1", "0", sriov("2", "1", "2")...) // a VF "listing" 01:00.3
	fn("0000:01:00.2", "0")
	fn("0000:01:00.3", "0", sriov("8", "0", "1")...)
	for i := range 64 { // enough functions for both workers
		fn(fmt.Sprintf("0000:%02x:00.0", 0x10+i), "0")
	}
	writeTree(t, dir, files)
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		s := &session{root: root}
		var f facts.Facts
		runPCI(context.Background(), s, &f)
		if len(f.PCI) != 68 || len(s.unknown) != 0 {
			t.Fatalf("%d functions, unknown %v", len(f.PCI), s.unknown)
		}
		got := map[string]string{}
		for _, d := range f.PCI[:4] {
			got[d.Address] = fmt.Sprintf("numa %v total %v num %v", intOrDash(d.NUMANode), intOrDash(d.SRIOVTotal), intOrDash(d.SRIOVNum))
		}
		want := map[string]string{
			"0000:01:00.0": "numa 1 total 4 num 2",
			"0000:01:00.1": "numa 1 total - num -",
			"0000:01:00.2": "numa 1 total - num -",
			"0000:01:00.3": "numa 0 total 8 num 0",
		}
		if !maps.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// intOrDash is *p, or "-" for nil.
func intOrDash(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}
