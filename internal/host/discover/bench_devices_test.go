package discover

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// BenchmarkPCIBigHost reads a synthetic 8-GPU server with 400 PCI
// functions (bridges, NICs, GPUs and their audio functions) in a tree
// laid out like sysfs, with the distribution's full pci.ids.
func BenchmarkPCIBigHost(b *testing.B) {
	ids, err := os.ReadFile("/usr/share/misc/pci.ids")
	if err != nil {
		b.Fatalf("%v (install the Debian package pci.ids)", err)
	}
	dir := b.TempDir()
	files := map[string]string{"usr/share/misc/pci.ids": string(ids)}
	for i := range 400 {
		addr := fmt.Sprintf("0000:%02x:%02x.%d", i/32, i%32, i%8)
		d := "sys/bus/pci/devices/" + addr + "/"
		id, class, drv := "8086:2030", "60400", "pcieport"
		switch {
		case i%50 == 0:
			id, class, drv = "10DE:2330", "30200", "vfio-pci"
		case i%50 == 1:
			id, class, drv = "10DE:22A3", "40300", "vfio-pci"
		case i%5 == 0:
			id, class, drv = "15B3:1019", "20000", "mlx5_core"
		}
		files[d+"uevent"] = "DRIVER=" + drv + "\nPCI_CLASS=" + class + "\nPCI_ID=" + id + "\n"
		files[d+"iommu_group"] = fmt.Sprintf("->../../../kernel/iommu_groups/%d", i/4)
		files[d+"numa_node"] = fmt.Sprint(i/200, "\n")
	}
	writeTreeB(b, dir, files)
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := &session{root: root}
		var f facts.Facts
		runPCI(context.Background(), s, &f)
		if len(f.PCI) != 400 || len(f.GPUs) != 8 || f.GPUs[0].Model == "" || f.PCI[2].VendorName != "" {
			b.Fatalf("pci %d gpus %d", len(f.PCI), len(f.GPUs))
		}
	}
}

// BenchmarkLiveMine runs this file's subsystems on the machine's own root.
func BenchmarkLiveMine(b *testing.B) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := &session{root: root, opt: Options{PCIIDs: "/usr/share/misc/pci.ids"}}
		var f facts.Facts
		for _, run := range []func(context.Context, *session, *facts.Facts){runDevices, runIOMMU, runPCI, runTEE} {
			run(context.Background(), s, &f)
		}
	}
}

func writeTreeB(b *testing.B, dir string, files map[string]string) {
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		if len(content) > 2 && content[:2] == "->" {
			if err := os.Symlink(content[2:], full); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
