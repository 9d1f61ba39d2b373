package discover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/pciids"
)

const pciDevicesDir = "sys/bus/pci/devices"

// pciIDsPaths are where distributions install the pci.ids database, tried
// in the host root before Options.PCIIDs.
var pciIDsPaths = []string{"usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids"}

// runPCI fills Facts.PCI and, from it, Facts.GPUs.
//
// Every device is listed (bridges included: a GPU's group isolation is
// judged against them), with only the fields the kernel has for it, and
// names for all but bridges: about 110 bytes of JSON per bridge and 170
// per named device. A
// device whose identity cannot be read is left out and recorded as unknown
// under "pci[<address>]". A host without a PCI bus (some microVMs) has an
// empty list and no unknown; an unreadable bus makes "pci" unknown.
func runPCI(_ context.Context, s *session, f *facts.Facts) {
	ents, err := s.root.FS().ReadDir(pciDevicesDir)
	if err != nil {
		if !(errors.Is(err, fs.ErrNotExist) && s.exists("sys/bus")) {
			s.unknownf("pci", "%s", ReadReason(pciDevicesDir, err))
			s.unknownf("gpus", "%s", ReadReason(pciDevicesDir, err))
			s.unknownf("nvswitches", "%s", ReadReason(pciDevicesDir, err))
		}
		return
	}
	mdev := s.exists("sys/class/mdev_bus")
	// In the order of their addresses, a PF comes before its VFs: a VF's
	// routing ID is its PF's plus the SR-IOV offset (at least 1), in the
	// same domain, and a domain's addresses have digits of one width.
	// fs.ReadDirFS promises that order; a root that breaks it is sorted.
	byName := func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) }
	if !slices.IsSortedFunc(ents, byName) {
		slices.SortFunc(ents, byName)
	}
	n := len(ents)
	at := make(map[string]int, n)
	for i, e := range ents {
		at[e.Name()] = i
	}
	all := make([]facts.PCIDevice, n)
	okAt := make([]bool, n)
	vfAddrs := make([][]string, n)
	// A big host's functions are mostly SR-IOV virtual functions (4,096
	// on a node with a few NICs and GPUs split up). The kernel shows the
	// sriov_* files on a PF only, so a function a PF has listed as its VF
	// is not asked for them: listed[j] says a function before j listed
	// it when j is read, and skipped[j] that j was read without them.
	// resolveVFs then settles, in address order and whatever the timing,
	// which functions are VFs.
	listed := make([]atomic.Bool, n)
	skipped := make([]bool, n)
	forEachDevice(n, func(i int) {
		known := listed[i].Load()
		d, vfs, err := s.pciDevice(ents[i].Name(), mdev, !known)
		if err != nil {
			s.unknownf("pci["+ents[i].Name()+"]", "%v", err)
			return
		}
		all[i], okAt[i], vfAddrs[i], skipped[i] = d, true, vfs, known
		for _, a := range vfs {
			if j, ok := at[a]; ok && j > i {
				listed[j].Store(true)
			}
		}
	})
	pfOf := resolveVFs(all, okAt, vfAddrs, skipped, at, func(i int) []string {
		h := hostfs.OpenDirHandle(s.root.FS(), path.Join(pciDevicesDir, all[i].Address))
		defer h.Close()
		all[i].NUMANode = pciNUMANode(h)
		return readSRIOV(h, &all[i])
	})
	// A VF sits on its PF's bus or on a bus below the same root bridge,
	// and the kernel gives both the node of that bus (pcibus_to_node): its
	// numa_node is its PF's, and is not read. That spares a third of the
	// reads per VF.
	for i, pf := range pfOf {
		if pf < 0 {
			continue
		}
		all[i].NUMANode = nil
		if all[pf].NUMANode != nil {
			n := *all[pf].NUMANode
			all[i].NUMANode = &n
		}
	}
	// In place: a copy of thousands of PCIDevices is ~200 bytes each. They
	// are in address order already, as ents are.
	devs := all[:0]
	for i, d := range all {
		if okAt[i] {
			devs = append(devs, d)
		}
	}
	s.namePCI(devs)
	if len(devs) > 0 {
		f.PCI = devs
	}
	f.GPUs = gpus(devs)
	f.NVSwitches = nvswitches(devs)
	s.gpuCC(f)
}

// forEachDevice calls fn for 0..n-1 on a few workers: big hosts have
// thousands of functions, each costing a few sysfs reads.
func forEachDevice(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), 8, n/32+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// pciDevice reads one device. The uevent file gives vendor, device,
// class and driver in one read (sysfs reads dominate discovery time on
// hosts with hundreds of functions); fixture trees may have only the
// separate vendor/device/class files and the driver symlink. With sriov, vfs are the addresses of the virtual
// functions of a physical function with SR-IOV enabled, computed from its
// routing ID, VF offset and stride as the PCIe specification lays them
// out; none when the kernel does not give the offset and stride. Without
// it (a function known to be a VF), neither the sriov_* files nor
// numa_node are read.
func (s *session) pciDevice(addr string, mdev, sriov bool) (d facts.PCIDevice, vfs []string, err error) {
	dir := path.Join(pciDevicesDir, addr)
	// The device's directory is resolved once, and its files looked up
	// from it: a path from the root is a walk of six components through
	// the device's symlink, and a VF's three reads were three such walks.
	// The reads give what reads of dir/<file> would, errors included.
	h := hostfs.OpenDirHandle(s.root.FS(), dir)
	defer h.Close()
	d = facts.PCIDevice{Address: addr}
	if b, uerr := h.ReadFile("uevent"); uerr == nil {
		err = parsePCIUevent(b, &d)
		if err != nil {
			err = fmt.Errorf("%s: %s/uevent: %w", facts.ReasonUnparseable, dir, err)
		}
	} else {
		err = pciIdentity(h, dir, &d)
	}
	if err != nil {
		return d, nil, err
	}
	if d.Driver == "" {
		if t, err := h.ReadLink("driver"); err == nil {
			d.Driver = path.Base(t)
		}
	}
	if t, err := h.ReadLink("iommu_group"); err == nil {
		if g, err := strconv.Atoi(path.Base(t)); err == nil {
			d.IOMMUGroup = &g
		}
	}
	if sriov {
		d.NUMANode = pciNUMANode(h)
		vfs = readSRIOV(h, &d)
	}
	if mdev {
		d.VGPUTypes = s.mdevTypes(addr)
	}
	if d.Vendor == "10de" {
		if b, ok := s.readFile("", dir+"/nvidia/creatable_vgpu_types"); ok {
			d.VGPUTypes = append(d.VGPUTypes, parseVGPUTypes(string(b))...)
		}
		// NVIDIA vGPU virtual functions are GPUs of their own: the
		// link tells them from whole GPUs.
		if t, err := h.ReadLink("physfn"); err == nil {
			d.PhysFn = path.Base(t)
		}
	}
	return d, vfs, nil
}

// readSRIOV reads the SR-IOV files of the function d from its directory
// h, and gives the addresses of its enabled VFs.
func readSRIOV(h hostfs.DirHandle, d *facts.PCIDevice) (vfs []string) {
	if n, ok := readIntIn(h, "sriov_totalvfs"); ok {
		d.SRIOVTotal = &n
		if n, ok := readIntIn(h, "sriov_numvfs"); ok {
			d.SRIOVNum = &n
			vfs = vfAddresses(h, d.Address, n)
		}
	}
	return vfs
}

// resolveVFs says which functions are VFs, and of which PF (pfOf[j] is
// j's PF's index, or -1), from the VF lists read (vfs; at indexes the
// functions by address, ok says which were read). A function is a VF when
// a function before it in address order that is not a VF itself lists
// it. A VF has no SR-IOV fields: the kernel shows sriov_* on PFs only,
// so only a fixture could give a VF some, and they are dropped. The
// functions read without their SR-IOV files (skipped) because another
// listed them are read now (reread) when that other turned out to be a
// VF: then, as the rule goes in address order, the answer is what
// reading every function whole would give, however the reads were timed.
func resolveVFs(all []facts.PCIDevice, ok []bool, vfs [][]string, skipped []bool, at map[string]int, reread func(i int) []string) []int {
	pfOf := make([]int, len(all))
	for i := range pfOf {
		pfOf[i] = -1
	}
	for i := range all {
		switch {
		case !ok[i]:
			continue
		case pfOf[i] >= 0:
			all[i].SRIOVTotal, all[i].SRIOVNum = nil, nil
			continue
		case skipped[i]:
			vfs[i] = reread(i)
		}
		for _, a := range vfs[i] {
			if j, found := at[a]; found && j > i && ok[j] {
				pfOf[j] = i
			}
		}
	}
	return pfOf
}

// pciNUMANode reads the numa_node of a device's directory h; -1 means
// "no NUMA affinity" and is left out like an absent file.
func pciNUMANode(h hostfs.DirHandle) *int {
	if n, ok := readIntIn(h, "numa_node"); ok && n >= 0 {
		return &n
	}
	return nil
}

// vfAddresses computes the addresses of the n enabled virtual functions
// of the physical function at addr (its sysfs directory h): VF i has
// routing ID RID(PF) + offset + i*stride (PCIe base specification, SR-IOV
// capability), in the PF's domain.
func vfAddresses(h hostfs.DirHandle, addr string, n int) []string {
	if n <= 0 {
		return nil
	}
	offset, ok1 := readIntIn(h, "sriov_offset")
	stride, ok2 := readIntIn(h, "sriov_stride")
	if !ok1 || !ok2 || offset <= 0 || stride < 0 || n > 1<<16 {
		return nil
	}
	dom, rid, ok := parsePCIAddress(addr)
	if !ok {
		return nil
	}
	out := make([]string, 0, n)
	for i := range n {
		r := rid + offset + i*stride
		if r > 0xffff {
			break
		}
		out = append(out, pciAddress(dom, r))
	}
	return out
}

// parsePCIAddress splits a sysfs function name "DDDD:BB:dd.f" into its
// domain and routing ID. The domain may have more than four digits
// (Intel VMD's start at 10000).
func parsePCIAddress(addr string) (dom, rid int, ok bool) {
	d, rest, ok1 := strings.Cut(addr, ":")
	b, rest, ok2 := strings.Cut(rest, ":")
	dv, f, ok3 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ok3 || len(d) < 4 || len(d) > 8 || len(b) != 2 || len(dv) != 2 || len(f) != 1 {
		return 0, 0, false
	}
	var v [4]uint64
	for i, p := range []string{d, b, dv, f} {
		var err error
		if v[i], err = strconv.ParseUint(p, 16, 32); err != nil {
			return 0, 0, false
		}
	}
	if v[2] > 0x1f || v[3] > 7 {
		return 0, 0, false
	}
	return int(v[0]), int(v[1]<<8 | v[2]<<3 | v[3]), true
}

// pciAddress formats domain dom and routing ID rid as sysfs names a
// function ("%04x:%02x:%02x.%x"), without fmt: an SR-IOV host has
// thousands of virtual functions.
func pciAddress(dom, rid int) string {
	b := make([]byte, 0, 16)
	b = appendHexPad(b, dom, 4)
	b = append(b, ':')
	b = appendHexPad(b, rid>>8, 2)
	b = append(b, ':')
	b = appendHexPad(b, (rid>>3)&0x1f, 2)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(rid&7), 16)
	return string(b)
}

// appendHexPad appends v in lower-case hex, zero-padded to width digits.
func appendHexPad(b []byte, v, width int) []byte {
	digits := 1
	for x := v >> 4; x > 0; x >>= 4 {
		digits++
	}
	for ; digits < width; digits++ {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(v), 16)
}

// pciIdentity reads vendor, device and class from their own files of
// the device's directory h (dir) into d. The values are set at the end,
// not through pointers to d's fields: those would move every caller's
// PCIDevice to the heap.
func pciIdentity(h hostfs.DirHandle, dir string, d *facts.PCIDevice) error {
	var v [3]string
	for i, fld := range [3]struct {
		name  string
		width int
	}{{"vendor", 4}, {"device", 4}, {"class", 6}} {
		p := dir + "/" + fld.name
		b, err := h.ReadFile(fld.name)
		if err != nil {
			return errors.New(ReadReason(p, err))
		}
		if v[i], err = pciHex(strings.TrimSpace(string(b)), fld.width); err != nil {
			return errors.New(unparseable(p, 1, err.Error()))
		}
	}
	d.Vendor, d.Device, d.Class = v[0], v[1], v[2]
	return nil
}

// parsePCIUevent reads DRIVER, PCI_CLASS and PCI_ID from a device's uevent.
// It runs once per PCI function (thousands on a big host), so it neither
// splits the text nor formats, and copies out the three values only: a
// string of the whole text would be kept by them, 200-odd bytes a
// function.
func parsePCIUevent(text []byte, d *facts.PCIDevice) error {
	var id, class string
	for rest := text; len(rest) > 0; {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		k, v, ok := bytes.Cut(bytes.TrimSpace(l), []byte("="))
		if !ok {
			continue
		}
		switch string(k) {
		case "DRIVER":
			d.Driver = string(v)
		case "PCI_CLASS":
			class = string(v)
		case "PCI_ID":
			id = string(v)
		}
	}
	ven, dev, ok := strings.Cut(id, ":")
	if !ok {
		return fmt.Errorf("PCI_ID: expected VVVV:DDDD, got %q", id)
	}
	var err error
	if d.Vendor, err = pciHex(ven, 4); err != nil {
		return fmt.Errorf("PCI_ID vendor: %w", err)
	}
	if d.Device, err = pciHex(dev, 4); err != nil {
		return fmt.Errorf("PCI_ID device: %w", err)
	}
	if d.Class, err = pciHex(class, 6); err != nil {
		return fmt.Errorf("PCI_CLASS: %w", err)
	}
	return nil
}

// pciHex normalises "0x10DE" or "20000" to width lower-case hex digits.
func pciHex(v string, width int) (string, error) {
	v = strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X")
	if v == "" || len(v) > width {
		return "", fmt.Errorf("expected up to %d hex digits, got %q", width, v)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", fmt.Errorf("expected up to %d hex digits, got %q", width, v)
		}
	}
	if len(v) < width {
		v = "000000"[:width-len(v)] + v
	}
	return strings.ToLower(v), nil
}

// readIntIn reads the sysfs integer name of the directory h quietly (for
// optional files).
func readIntIn(h hostfs.DirHandle, name string) (int, bool) {
	b, err := h.ReadFile(name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// mdevTypes lists the mediated-device (pre-Ampere vGPU) types of a device
// as "<type>: <name>".
func (s *session) mdevTypes(addr string) []string {
	dir := "sys/class/mdev_bus/" + addr + "/mdev_supported_types"
	ents, err := s.root.FS().ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		t := e.Name()
		if name, ok := s.readString("", dir+"/"+t+"/name"); ok && name != "" {
			t += ": " + name
		}
		out = append(out, t)
	}
	return out
}

// parseVGPUTypes parses nvidia/creatable_vgpu_types ("1428 : NVIDIA
// H200X-141C" per line, possibly under an "ID : vGPU Name" header) into
// "<id>: <name>".
func parseVGPUTypes(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		id, name, ok := strings.Cut(l, ":")
		id, name = strings.TrimSpace(id), strings.TrimSpace(name)
		if !ok || id == "" {
			continue
		}
		if _, err := strconv.Atoi(id); err != nil {
			continue // header line
		}
		out = append(out, id+": "+name)
	}
	return out
}

// namePCI fills vendor and device names from pci.ids: the host root's copy
// first, else Options.PCIIDs (the copy on the machine berth runs on).
// Names are cosmetic: without a database they stay empty and nothing is
// recorded as unknown.
func (s *session) namePCI(devs []facts.PCIDevice) {
	if len(devs) == 0 {
		return
	}
	r, src := s.openPCIIDs()
	if r == nil {
		slog.Debug("no pci.ids database; PCI names left empty")
		return
	}
	defer r.Close()
	want := make([]pciids.ID, len(devs))
	for i, d := range devs {
		want[i] = pciids.ID{Vendor: d.Vendor, Device: d.Device}
	}
	names := s.resolvePCI(r, src, want)
	for i := range devs {
		// Bridges (class 06) are half the functions of a big host and
		// their names help nobody: leaving them out keeps Facts small.
		if strings.HasPrefix(devs[i].Class, "06") {
			continue
		}
		devs[i].VendorName = names.Vendor(devs[i].Vendor)
		devs[i].DeviceName = names.Device(want[i])
	}
}

// resolvePCI names want from the pci.ids r read from src, or from the
// cache while that file is unchanged.
func (s *session) resolvePCI(r io.Reader, src string, want []pciids.ID) pciids.Names {
	var key string
	var file fileID
	cacheable := false
	if st, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok && s.opt.Cache != nil {
		if fi, err := st.Stat(); err == nil {
			file, cacheable = identify(fi)
		}
	}
	if cacheable {
		key = pciKey(src, want)
		if v, ok := s.opt.Cache.get(key, file); ok {
			return v.(pciids.Names)
		}
	}
	names, err := pciids.Resolve(r, want)
	if err != nil {
		slog.Warn("reading pci.ids", "path", src, "err", err)
		return names
	}
	if cacheable {
		s.opt.Cache.put(key, names, file)
	}
	return names
}

func (s *session) openPCIIDs() (io.ReadCloser, string) {
	for _, p := range pciIDsPaths {
		if f, err := s.root.FS().Open(p); err == nil {
			return f, p
		}
	}
	if s.opt.PCIIDs != "" {
		f, err := os.Open(s.opt.PCIIDs)
		if err == nil {
			return f, s.opt.PCIIDs
		}
		slog.Debug("opening pci.ids", "err", err)
	}
	return nil, ""
}
