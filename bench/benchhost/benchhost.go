// Package benchhost writes a large node's host root for benchmarks: the
// PCI tree of an 8-GPU server with SR-IOV virtual functions, the IOMMU
// groups, a dpkg database of a real server's size and container runtime,
// kubelet and QEMU binaries of their real sizes. It is generated into a
// temporary directory when a benchmark or bench/peers.sh runs and never
// committed: the tree has thousands of files and the binaries are tens of
// megabytes.
//
// The shapes follow real machines: each GPU sits behind a PCIe switch
// below a root port (as on HGX boards), each NIC physical function has its
// virtual functions on the following bus numbers with a physfn link, each
// function has its own IOMMU group (ACS on), and sysfs files hold what the
// kernel writes (uevent with DRIVER, PCI_CLASS and PCI_ID; vendor, device
// and class as 0x-prefixed hex). The IDs are those of real parts (NVIDIA
// H100 SXM5, Mellanox ConnectX-7 and its VF, Intel E810 and its adaptive
// VF, Samsung PM9A3, AMD root ports); the version strings are those of
// Debian bookworm's packages.
package benchhost

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Spec sizes a generated host.
type Spec struct {
	// GPUs are NVIDIA H100s behind PCIe switches, each with GPUVFs
	// SR-IOV virtual functions enabled.
	GPUs, GPUVFs int
	// NICs are ConnectX-7 ports with NICVFs virtual functions each.
	NICs, NICVFs int
	// NVMe is the number of NVMe drives.
	NVMe int
	// Functions is the total number of PCI functions; when it is larger
	// than the above, Intel E810 ports with up to 256 VFs each fill the
	// rest.
	Functions int
	// DpkgPackages is the number of installed packages in the status
	// database (a Kubernetes node with a desktop-free Debian: ~1,500).
	DpkgPackages int
}

// Base is a large GPU node as shipped: 8 GPUs with 16 VFs each, 2 NICs
// with 128 VFs each.
func Base() Spec {
	return Spec{GPUs: 8, GPUVFs: 16, NICs: 2, NICVFs: 128, NVMe: 8, DpkgPackages: 1500}
}

// Large is Base filled up to 4,096 PCI functions with more NIC VFs.
func Large() Spec {
	s := Base()
	s.Functions = 4096
	return s
}

// Summary says what Write wrote.
type Summary struct {
	// Functions is the number of PCI functions, VFs the number of
	// virtual functions among them, GPUs the number of physical GPUs.
	Functions, VFs, GPUs int
	// Binaries are the paths of the generated binaries, relative to the
	// root, and their sizes.
	Binaries map[string]int64
}

// PCI IDs of the generated parts (vendor:device).
const (
	idRootPort = "1022:1483" // AMD Starship/Matisse GPP bridge
	idSwitch   = "1000:c030" // Broadcom PEX890xx PCIe switch
	idGPU      = "10de:2330" // NVIDIA GH100 [H100 SXM5 80GB]
	idCX7      = "15b3:1021" // Mellanox MT2910 [ConnectX-7]
	idCX7VF    = "15b3:101e" // Mellanox ConnectX Family mlx5Gen Virtual Function
	idE810     = "8086:159b" // Intel E810-XXV
	idE810VF   = "8086:1889" // Intel Ethernet Adaptive Virtual Function
	idNVMe     = "144d:a80a" // Samsung PM9A1/PM9A3/980PRO
)

type pciFn struct {
	addr, id, class, driver string
	numa                    int
	totalVFs, numVFs        int
	physfn                  string
	// vfOffset and vfStride place the VFs: VF i has routing ID
	// RID(PF) + vfOffset + i*vfStride.
	vfOffset, vfStride int
}

// Write generates the host root of spec under dir.
func Write(dir string, spec Spec) (Summary, error) {
	fns := layout(spec)
	sum := Summary{Functions: len(fns), GPUs: spec.GPUs, Binaries: map[string]int64{}}
	w := writer{dir: dir}
	for group, fn := range fns {
		if fn.physfn != "" {
			sum.VFs++
		}
		d := "sys/bus/pci/devices/" + fn.addr + "/"
		ven, dev, _ := strings.Cut(fn.id, ":")
		drv := ""
		if fn.driver != "" {
			// An unbound function (a host bridge) has no DRIVER line and
			// no driver link.
			drv = "DRIVER=" + fn.driver + "\n"
			w.link(d+"driver", "../../../bus/pci/drivers/"+fn.driver)
		}
		w.file(d+"uevent", fmt.Sprintf("%sPCI_CLASS=%s\nPCI_ID=%s\nPCI_SUBSYS_ID=%s\nPCI_SLOT_NAME=%s\nMODALIAS=pci:v0000%sd0000%ssv0000%ssd00000000bc%ssc%si%s\n",
			drv, strings.TrimLeft(fn.class, "0"), strings.ToUpper(fn.id), strings.ToUpper(fn.id), fn.addr,
			strings.ToUpper(ven), strings.ToUpper(dev), strings.ToUpper(ven), strings.ToUpper(fn.class[:2]), strings.ToUpper(fn.class[2:4]), strings.ToUpper(fn.class[4:])))
		w.file(d+"vendor", "0x"+ven+"\n")
		w.file(d+"device", "0x"+dev+"\n")
		w.file(d+"class", "0x"+fn.class+"\n")
		w.file(d+"numa_node", fmt.Sprintf("%d\n", fn.numa))
		w.link(d+"iommu_group", fmt.Sprintf("../../../kernel/iommu_groups/%d", group))
		w.link(fmt.Sprintf("sys/kernel/iommu_groups/%d/devices/%s", group, fn.addr), "../../../../devices/pci0000:00/"+fn.addr)
		if fn.totalVFs > 0 {
			w.file(d+"sriov_totalvfs", fmt.Sprintf("%d\n", fn.totalVFs))
			w.file(d+"sriov_numvfs", fmt.Sprintf("%d\n", fn.numVFs))
			w.file(d+"sriov_offset", fmt.Sprintf("%d\n", fn.vfOffset))
			w.file(d+"sriov_stride", fmt.Sprintf("%d\n", fn.vfStride))
		}
		if fn.physfn != "" {
			w.link(d+"physfn", "../"+fn.physfn)
		}
	}
	if ids, err := os.ReadFile("/usr/share/misc/pci.ids"); err == nil {
		// The distribution's own database, as a node has it; without it
		// (no pci.ids package) names stay empty, as on such a node.
		w.file("usr/share/misc/pci.ids", string(ids))
	}
	w.file("etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nVERSION=\"12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\n")
	w.file("proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-41-amd64 root=UUID=0b6f1c2e ro quiet amd_iommu=on iommu=pt\n")
	for _, b := range []struct {
		path   string
		size   int64
		rodata int
		marker string
	}{
		// Sizes of Debian bookworm's builds (containerd 1.6.20: 49 MB;
		// qemu-system-x86 7.2: 20 MB with 1.8 MB of .rodata) and of
		// the upstream kubelet v1.31 release binary (77 MB).
		{"usr/bin/containerd", 49 << 20, 1 << 20, ""},
		{"usr/bin/qemu-system-x86_64", 20 << 20, 1800 << 10, "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\n"},
		{"usr/bin/kubelet", 77 << 20, 1 << 20, ""},
	} {
		w.elf(b.path, b.size, b.rodata, b.marker)
		sum.Binaries[b.path] = b.size
	}
	// After the binaries, as dpkg writes a package's .list file after
	// unpacking it: a binary changed later is not the package's.
	writeDpkg(&w, spec.DpkgPackages)
	if w.err != nil {
		return sum, w.err
	}
	return sum, nil
}

// layout lists the PCI functions of spec in address order.
func layout(spec Spec) []pciFn {
	var fns []pciFn
	add := func(fn pciFn) { fns = append(fns, fn) }
	// Domain 0000 has 256 buses: a 4,096-function host spreads its VFs
	// over the next domains, as a multi-socket server does.
	addrIn := func(b, dev, fn int) string {
		return fmt.Sprintf("%04x:%02x:%02x.%d", b/256, b%256, dev, fn)
	}
	// Host bridges, one per quadrant.
	for i := range 4 {
		add(pciFn{addr: addrIn(0, i, 0), id: "1022:14a4", class: "060000", driver: "", numa: i / 2})
	}
	vfs := func(pf pciFn, n int, id, driver string, firstBus int) int {
		b := firstBus
		for v := range n {
			slot, fn := (v/8)%32, v%8
			if v > 0 && v%256 == 0 {
				b++
			}
			add(pciFn{addr: addrIn(b, slot, fn), id: id, class: pf.class, driver: driver, numa: pf.numa, physfn: pf.addr})
		}
		if n == 0 {
			return firstBus
		}
		return b + 1
	}
	bus := 1
	for g := range spec.GPUs {
		numa := g * 2 / max(1, spec.GPUs)
		add(pciFn{addr: addrIn(bus, 1, 0), id: idRootPort, class: "060400", driver: "pcieport", numa: numa})
		add(pciFn{addr: addrIn(bus+1, 0, 0), id: idSwitch, class: "060400", driver: "pcieport", numa: numa})
		add(pciFn{addr: addrIn(bus+2, 0, 0), id: idSwitch, class: "060400", driver: "pcieport", numa: numa})
		// VFs start on the bus after their PF's, one routing ID apart.
		gpu := pciFn{addr: addrIn(bus+3, 0, 0), id: idGPU, class: "030200", driver: "nvidia", numa: numa, totalVFs: max(spec.GPUVFs, 32), numVFs: spec.GPUVFs, vfOffset: 256, vfStride: 1}
		add(gpu)
		bus = vfs(gpu, spec.GPUVFs, idGPU, "nvidia", bus+4)
	}
	for n := range spec.NICs {
		numa := n % 2
		add(pciFn{addr: addrIn(bus, 1, 0), id: idRootPort, class: "060400", driver: "pcieport", numa: numa})
		nic := pciFn{addr: addrIn(bus+1, 0, 0), id: idCX7, class: "020000", driver: "mlx5_core", numa: numa, totalVFs: max(spec.NICVFs, 127), numVFs: spec.NICVFs, vfOffset: 256, vfStride: 1}
		add(nic)
		bus = vfs(nic, spec.NICVFs, idCX7VF, "mlx5_core", bus+2)
	}
	for n := range spec.NVMe {
		add(pciFn{addr: addrIn(bus, 1, 0), id: idRootPort, class: "060400", driver: "pcieport", numa: n % 2})
		add(pciFn{addr: addrIn(bus+1, 0, 0), id: idNVMe, class: "010802", driver: "nvme", numa: n % 2})
		bus += 2
	}
	for n := 0; len(fns) < spec.Functions; n++ {
		numa := n % 2
		left := spec.Functions - len(fns)
		if left < 3 {
			add(pciFn{addr: addrIn(bus, 1, 0), id: idRootPort, class: "060400", driver: "pcieport", numa: numa})
			bus++
			continue
		}
		add(pciFn{addr: addrIn(bus, 1, 0), id: idRootPort, class: "060400", driver: "pcieport", numa: numa})
		k := min(256, left-2)
		nic := pciFn{addr: addrIn(bus+1, 0, 0), id: idE810, class: "020000", driver: "ice", numa: numa, totalVFs: 256, numVFs: k, vfOffset: 256, vfStride: 1}
		add(nic)
		bus = vfs(nic, k, idE810VF, "iavf", bus+2)
	}
	return fns
}

// writeDpkg writes a status database of n installed packages (about
// 1.8 KB a stanza with its description, as bookworm's are: 1,500
// packages make 2.7 MB) with the container runtime and QEMU among them,
// and their .list files.
func writeDpkg(w *writer, n int) {
	var sb strings.Builder
	stanza := func(name, arch, version, desc string) {
		fmt.Fprintf(&sb, "Package: %s\nStatus: install ok installed\nPriority: optional\nSection: admin\nInstalled-Size: 12345\nMaintainer: Debian Go Packaging Team <team+pkg-go@tracker.debian.org>\nArchitecture: %s\nVersion: %s\nDepends: libc6 (>= 2.34), libseccomp2 (>= 2.5.0)\nDescription: %s\n", name, arch, version, desc)
		for i := range 16 {
			fmt.Fprintf(&sb, " line %d of the long description of %s, wrapped at about seventy columns as usual.\n", i, name)
		}
		sb.WriteString("Homepage: https://example.org/\n\n")
	}
	for i := range n {
		switch i {
		case n / 3:
			stanza("containerd", "amd64", "1.6.20~ds1-1+deb12u3", "daemon to control runC")
		case n / 2:
			stanza("qemu-system-x86", "amd64", "1:7.2+dfsg-7+deb12u18+b3", "QEMU full system emulation binaries (x86)")
		case 2 * n / 3:
			stanza("kubelet", "amd64", "1.31.4-1.1", "Node agent for Kubernetes clusters")
		default:
			stanza(fmt.Sprintf("lib-bench-%04d", i), "amd64", fmt.Sprintf("%d.%d.%d-1", i%7, i%13, i%5), "a library")
		}
	}
	w.file("var/lib/dpkg/status", sb.String())
	lists := map[string][]string{
		"containerd":      {"/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2", "/usr/share/doc/containerd"},
		"qemu-system-x86": {"/usr/bin/qemu-system-x86_64", "/usr/bin/qemu-system-i386", "/usr/share/doc/qemu-system-x86"},
		"kubelet":         {"/usr/bin/kubelet"},
	}
	for pkg, files := range lists {
		var l strings.Builder
		l.WriteString("/.\n/usr\n/usr/bin\n/usr/share\n/usr/share/doc\n")
		for i := range 200 {
			fmt.Fprintf(&l, "/usr/share/doc/%s/file-%03d\n", pkg, i)
		}
		l.WriteString(strings.Join(files, "\n") + "\n")
		w.file("var/lib/dpkg/info/"+pkg+".list", l.String())
	}
}

// writer writes files under dir, keeping the first error.
type writer struct {
	dir string
	err error
}

func (w *writer) full(p string) string {
	full := filepath.Join(w.dir, filepath.FromSlash(p))
	if w.err == nil {
		w.err = os.MkdirAll(filepath.Dir(full), 0o755)
	}
	return full
}

func (w *writer) file(p, content string) {
	full := w.full(p)
	if w.err == nil {
		w.err = os.WriteFile(full, []byte(content), 0o644)
	}
}

func (w *writer) link(p, target string) {
	full := w.full(p)
	if w.err == nil {
		w.err = os.Symlink(target, full)
	}
}

// elf writes an x86-64 ELF executable of size bytes whose .rodata
// section (rodata bytes of printf formats and messages) holds marker two
// thirds of the way in.
func (w *writer) elf(p string, size int64, rodata int, marker string) {
	full := w.full(p)
	if w.err != nil {
		return
	}
	data := make([]byte, rodata)
	for i := range data {
		data[i] = "abcdefghijklmnopqrstuvwxyz %s\x00"[i%30]
	}
	if marker != "" {
		copy(data[rodata*2/3:], "\x00"+marker+"\x00")
	}
	w.err = WriteELF(full, size, data)
}

// WriteELF writes an x86-64 ELF executable of size bytes with one
// .rodata section holding rodata, at the file's middle as in a real
// binary (after the code); the rest is a sparse hole, so that a static
// version source sees a binary of the real size and layout without the
// generator writing tens of megabytes.
func WriteELF(path string, size int64, rodata []byte) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	const ehsize, shentsize = 64, 64
	shstr := []byte("\x00.rodata\x00.shstrtab\x00")
	rodataOff := size / 2 &^ 0xfff
	shstrOff := rodataOff + int64(len(rodata))
	shOff := (shstrOff + int64(len(shstr)) + 7) &^ 7
	if shOff+3*shentsize > size {
		return fmt.Errorf("%s: %d bytes is too small for %d bytes of .rodata", path, size, len(rodata))
	}
	le := binary.LittleEndian
	var hdr bytes.Buffer
	hdr.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0})
	hdr.Write(make([]byte, 8))
	for _, v := range []any{
		uint16(2), uint16(62), uint32(1), // ET_EXEC, EM_X86_64, EV_CURRENT
		uint64(0x401000), uint64(0), uint64(shOff), // entry, phoff, shoff
		uint32(0), uint16(ehsize), uint16(0), uint16(0), // flags, ehsize, phentsize, phnum
		uint16(shentsize), uint16(3), uint16(2), // shentsize, shnum, shstrndx
	} {
		_ = binary.Write(&hdr, le, v)
	}
	section := func(name, typ uint32, flags, addr, off, sz uint64) []byte {
		var b bytes.Buffer
		for _, v := range []any{name, typ, flags, addr, off, sz, uint32(0), uint32(0), uint64(1), uint64(0)} {
			_ = binary.Write(&b, le, v)
		}
		return b.Bytes()
	}
	var sh bytes.Buffer
	sh.Write(make([]byte, shentsize))
	sh.Write(section(1, 1, 2, 0x800000, uint64(rodataOff), uint64(len(rodata)))) // .rodata: PROGBITS, ALLOC
	sh.Write(section(9, 3, 0, 0, uint64(shstrOff), uint64(len(shstr))))          // .shstrtab: STRTAB
	for _, c := range []struct {
		off int64
		b   []byte
	}{{0, hdr.Bytes()}, {rodataOff, rodata}, {shstrOff, shstr}, {shOff, sh.Bytes()}} {
		if _, err := f.WriteAt(c.b, c.off); err != nil {
			return err
		}
	}
	return f.Truncate(size)
}
