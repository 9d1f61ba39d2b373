package discover

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/pciids"
	"berth.dev/berth/internal/testkit/treetest"
)

// TestFileCacheLive discovers this machine's root twice with one
// cache, as the agent does every interval: the second run answers the
// binaries' static versions (and PCI names) from the cache, and they are
// the versions the first run read from the files.
func TestFileCacheLive(t *testing.T) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	c := NewFileCache()
	ctx := context.Background()
	first := Run(ctx, root, Options{Cache: c})
	static := 0
	for _, b := range first.Binaries {
		if b.VersionFrom != "" && b.VersionFrom != fromRun {
			static++
		}
	}
	if static == 0 {
		t.Fatalf("no binary's version came from a static source on this machine (CI installs containerd): %+v", first.Binaries)
	}
	if len(c.hits) != 0 {
		t.Fatalf("first run: cache hits %v, want none", c.hits)
	}
	// One hit per static version, for the PCI names where the machine has
	// named devices, for the kernel config where it has one, and per
	// module with parameters (all settled on a running system).
	want := map[string]int{"version": static}
	if slices.ContainsFunc(first.PCI, func(d facts.PCIDevice) bool { return d.VendorName != "" }) {
		want["pci"] = 1
	}
	if first.Kernel.ConfigSource != "" {
		want["kernelconfig"] = 1
	}
	for _, m := range first.Kernel.Modules {
		if len(m.Params) > 0 {
			want["modparams"]++
		}
	}
	second := Run(ctx, root, Options{Cache: c})
	if !maps.Equal(c.hits, want) {
		t.Errorf("second run: cache hits %v, want %v", c.hits, want)
	}
	if !reflect.DeepEqual(first.Kernel.Modules, second.Kernel.Modules) {
		t.Errorf("kernel modules: %+v from the files, %+v with the cache", first.Kernel.Modules, second.Kernel.Modules)
	}
	if !maps.Equal(first.Kernel.Config, second.Kernel.Config) {
		t.Errorf("kernel config: %v from the file, %v from the cache", first.Kernel.Config, second.Kernel.Config)
	}
	if len(second.Binaries) != len(first.Binaries) {
		t.Fatalf("binaries: %d then %d", len(first.Binaries), len(second.Binaries))
	}
	for i, b := range second.Binaries {
		if a := first.Binaries[i]; a.Version != b.Version || a.VersionFrom != b.VersionFrom || a.Vendor != b.Vendor {
			t.Errorf("%s: %s (%s) from the files, %s (%s) from the cache", b.Path, a.Version, a.VersionFrom, b.Version, b.VersionFrom)
		}
	}
}

// TestFileCacheInvalidation: an entry answers only for the very files
// it was read from; a binary or package database rewritten in place (same
// path, same size) or replaced is read again.
func TestFileCacheInvalidation(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "containerd")
	id := func() fileID {
		t.Helper()
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		i, ok := identify(fi)
		if !ok {
			t.Fatal("no file identity on this system")
		}
		return i
	}
	if err := os.WriteFile(bin, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	v1 := id()
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(bin, []byte("v2"), 0o755); err != nil { // same size, in place
		t.Fatal(err)
	}
	rewritten := id()
	repl := bin + ".new"
	if err := os.WriteFile(repl, []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(repl, bin); err != nil { // as a package manager replaces
		t.Fatal(err)
	}
	replaced := id()
	if v1 == rewritten || rewritten == replaced {
		t.Fatalf("identities do not tell the versions apart: %+v %+v %+v", v1, rewritten, replaced)
	}
	dpkg := fileID{ino: 7, size: 100}
	sv := staticVersion{Version: "2.2.9", From: fromBuildInfo}
	for _, tc := range []struct {
		name      string
		bin, dpkg fileID
		hit       bool
	}{
		{"same files", v1, dpkg, true},
		{"binary rewritten in place", rewritten, dpkg, false},
		{"binary replaced", replaced, dpkg, false},
		{"package database changed", v1, fileID{ino: 7, size: 101}, false},
		{"package database appeared", v1, fileID{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewFileCache()
			c.put("k", sv, v1, dpkg)
			got, ok := c.get("k", tc.bin, tc.dpkg)
			if ok != tc.hit || (ok && got.(staticVersion) != sv) {
				t.Errorf("get: %+v %v, want hit %v", got, ok, tc.hit)
			}
		})
	}
}

// TestFileCachePCINames discovers the build machine's fixture host (its
// pci.ids and six virtio functions) twice with one cache: the second run
// names the devices from the cache, with the names the file gave; the
// cache answers a set of IDs in any order, and never after pci.ids
// changed or for another set.
func TestFileCachePCINames(t *testing.T) {
	root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", "buildmachine-firecracker"))
	if err != nil {
		t.Fatal(err)
	}
	c := NewFileCache()
	ctx := context.Background()
	first := Run(ctx, root, Options{Cache: c})
	named := 0
	for _, d := range first.PCI {
		if d.VendorName != "" {
			named++
		}
	}
	if named == 0 || len(c.hits) != 0 {
		t.Fatalf("first run: %d devices named, cache hits %v; want some named from the file and no hit", named, c.hits)
	}
	second := Run(ctx, root, Options{Cache: c})
	if c.hits["pci"] != 1 || c.hits["kernelconfig"] != 1 {
		t.Errorf("second run: cache hits %v, want 1 for the PCI names and 1 for proc/config.gz", c.hits)
	}
	for i, d := range second.PCI {
		if a := first.PCI[i]; a.VendorName != d.VendorName || a.DeviceName != d.DeviceName {
			t.Errorf("%s: %q %q from the file, %q %q from the cache", d.Address, a.VendorName, a.DeviceName, d.VendorName, d.DeviceName)
		}
	}

	a, b := pciids.ID{Vendor: "1af4", Device: "1041"}, pciids.ID{Vendor: "8086", Device: "0d5a"}
	f1, f2 := fileID{ino: 1, size: 10}, fileID{ino: 2, size: 10}
	n := pciids.Names{Vendors: map[string]string{"1af4": "Red Hat, Inc."}}
	c = NewFileCache()
	c.put(pciKey("p", []pciids.ID{a, b}), n, f1)
	for _, tc := range []struct {
		name string
		want []pciids.ID
		file fileID
		hit  bool
	}{
		{"same set, same file", []pciids.ID{a, b}, f1, true},
		{"same set in another order, with a repeat", []pciids.ID{b, a, a}, f1, true},
		{"pci.ids replaced", []pciids.ID{a, b}, f2, false},
		{"another set", []pciids.ID{a}, f1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := c.get(pciKey("p", tc.want), tc.file)
			if ok != tc.hit || (ok && got.(pciids.Names).Vendor("1af4") != "Red Hat, Inc.") {
				t.Errorf("got %+v %v, want hit %v", got, ok, tc.hit)
			}
		})
	}
}

// TestFileCacheKernelConfig discovers a copy of the AKS fixture host
// (boot/config-<release>) with one cache: the config is kept while the
// file is the same, read again once it is rewritten or replaced, and the
// Facts of one run cannot change what the next one is given.
func TestFileCacheKernelConfig(t *testing.T) {
	dir, root := hostCopy(t, "aks-hyperv-nested")
	cfgPath := filepath.Join(dir, "boot", "config-5.15.0-1079-azure")
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	c := NewFileCache()
	ctx := context.Background()
	kvm := func() string {
		t.Helper()
		before := c.hits["kernelconfig"]
		f := Run(ctx, root, Options{Cache: c})
		if f.Kernel.ConfigSource != "boot/config-5.15.0-1079-azure" {
			t.Fatalf("config source %q", f.Kernel.ConfigSource)
		}
		v := f.Kernel.Config["KVM"]
		f.Kernel.Config["KVM"] = "spoilt" // a consumer's change stays in its Facts
		if c.hits["kernelconfig"]-before > 1 {
			t.Fatalf("%d hits in one run, want at most 1", c.hits["kernelconfig"]-before)
		}
		return v + map[bool]string{true: " (cached)", false: ""}[c.hits["kernelconfig"] > before]
	}
	rewrite := func(from, to string) {
		t.Helper()
		time.Sleep(10 * time.Millisecond) // a new mtime even on coarse clocks
		b := bytes.Replace(orig, []byte(from), []byte(to), 1)
		if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		change func()
		want   string
	}{
		{"first read", func() {}, "m"},
		{"same file", func() {}, "m (cached)"},
		{"rewritten in place, same size", func() { rewrite("CONFIG_KVM=m", "CONFIG_KVM=y") }, "y"},
		{"unchanged since", func() {}, "y (cached)"},
		{"replaced", func() {
			tmp := cfgPath + ".new"
			if err := os.WriteFile(tmp, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, cfgPath); err != nil {
				t.Fatal(err)
			}
		}, "m"},
	} {
		tc.change()
		if got := kvm(); got != tc.want {
			t.Errorf("%s: CONFIG_KVM %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestFileCacheModuleParams discovers a copy of the SNP host (kvm_amd Live
// in proc/modules) with one cache. A read-only parameter (sev_snp, 0444
// as the kernel makes it) is kept while the module's parameters directory
// is the same one; a writable one (nested, 0644) is read every time; a
// module reloaded (a new directory) or still loading is read again.
func TestFileCacheModuleParams(t *testing.T) {
	dir, root := hostCopy(t, "snp-genoa-k3s-ready")
	params := filepath.Join(dir, "sys", "module", "kvm_amd", "parameters")
	write := func(rel, v string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	snp, nested := "sys/module/kvm_amd/parameters/sev_snp", "sys/module/kvm_amd/parameters/nested"
	write(snp, "Y", 0o444)
	modules, err := os.ReadFile(filepath.Join(dir, "proc", "modules"))
	if err != nil {
		t.Fatal(err)
	}
	c := NewFileCache()
	ctx := context.Background()
	got := func() string {
		t.Helper()
		p := Run(ctx, root, Options{Cache: c}).Kernel.Modules["kvm_amd"].Params
		return "sev_snp=" + p["sev_snp"] + " nested=" + p["nested"]
	}
	for _, tc := range []struct {
		name   string
		change func()
		want   string
	}{
		{"first read", func() {}, "sev_snp=Y nested=1"},
		{"both rewritten: the read-only one is kept", func() { write(snp, "N", 0o444); write(nested, "0", 0o644) }, "sev_snp=Y nested=0"},
		{"module reloaded: a new directory", func() {
			old := params + ".old"
			if err := os.Rename(params, old); err != nil {
				t.Fatal(err)
			}
			treetest.Copy(t, old, params)
			if err := os.RemoveAll(old); err != nil {
				t.Fatal(err)
			}
		}, "sev_snp=N nested=0"},
		{"module loading: not kept", func() {
			b := bytes.Replace(modules, []byte("kvm_amd 245760 0 - Live"), []byte("kvm_amd 245760 0 - Loading"), 1)
			if err := os.WriteFile(filepath.Join(dir, "proc", "modules"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			write(snp, "Y", 0o444)
		}, "sev_snp=Y nested=0"},
		{"still loading", func() { write(snp, "N", 0o444) }, "sev_snp=N nested=0"},
	} {
		tc.change()
		if g := got(); g != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, g, tc.want)
		}
	}
}

// hostCopy copies the fixture host name to a temporary directory, for a
// test that changes it, and opens it as a root.
func hostCopy(t *testing.T, name string) (string, hostfs.Root) {
	t.Helper()
	dir := t.TempDir()
	treetest.Copy(t, filepath.Join("..", "..", "..", "testdata", "hosts", name), dir)
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, root
}
