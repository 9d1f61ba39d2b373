package refvalues

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/hostfs"

	"github.com/pelletier/go-toml/v2"
)

// KataVersion is the Kata Containers release whose guest kernel command
// line KataCmdline reproduces.
const KataVersion = "4.1.0"

// KataHost holds the host facts the Kata runtime reads when it builds the
// command line of a guest without a TEE.
type KataHost struct {
	// CPUs is the number of processors /proc/cpuinfo lists: Kata gives a
	// guest without a TEE nr_cpus=min(default_maxvcpus or CPUs, CPUs, 240).
	// Confidential guests get no nr_cpus, so it does not matter for them.
	CPUs int
}

// kataQEMUConfig is the part of a Kata (Go runtime) configuration file
// that decides the QEMU guest's kernel command line. Absent keys are the
// zero value, as in Kata's own decoding (pkg/katautils/config.go
// tomlConfig), except where a default is applied below.
type kataQEMUConfig struct {
	Hypervisor map[string]kataHypervisor `toml:"hypervisor"`
	Agent      map[string]kataAgent      `toml:"agent"`
}

type kataHypervisor struct {
	Image               string              `toml:"image"`
	Initrd              string              `toml:"initrd"`
	RootfsType          string              `toml:"rootfs_type"`
	DisableImageNvdimm  bool                `toml:"disable_image_nvdimm"`
	KernelVerityParams  string              `toml:"kernel_verity_params"`
	KernelParams        string              `toml:"kernel_params"`
	ConfidentialGuest   bool                `toml:"confidential_guest"`
	Debug               bool                `toml:"enable_debug"`
	DefaultMaxVCPUs     uint32              `toml:"default_maxvcpus"`
	DisableGuestSeLinux bool                `toml:"disable_guest_selinux"`
	LegacySerial        bool                `toml:"use_legacy_serial"`
	IOMMU               bool                `toml:"enable_iommu"`
	BlockDeviceDriver   string              `toml:"block_device_driver"`
	MachineType         string              `toml:"machine_type"`
	Extensions          []kataExtensionDisk `toml:"guest_extension_images"`
}

type kataExtensionDisk struct {
	Name         string `toml:"name"`
	VerityParams string `toml:"verity_params"`
}

type kataAgent struct {
	Debug                bool   `toml:"enable_debug"`
	Tracing              bool   `toml:"enable_tracing"`
	DebugConsoleEnabled  bool   `toml:"debug_console_enabled"`
	CdhAPITimeout        uint32 `toml:"cdh_api_timeout"`
	LaunchProcessTimeout uint32 `toml:"launch_process_timeout"`
	VisibleCdiDevices    bool   `toml:"visible_cdi_devices"`
}

// kataParam is one kernel parameter as Kata keeps it: key and value, with
// "key" alone written for an empty value (virtcontainers Param,
// SerializeParams).
type kataParam struct{ key, value string }

func (p kataParam) String() string {
	switch {
	case p.key == "":
		return p.value
	case p.value == "":
		return p.key
	}
	return p.key + "=" + p.value
}

// KataCmdline returns the guest kernel command line (QEMU -append) that
// the Kata Containers 4.1 Go runtime builds for the QEMU guest the
// configuration file config (named name in errors) describes: its
// kernel_params and what the runtime adds for the architecture, the root
// filesystem (image or initrd, NVDIMM or virtio-blk, dm-verity), the
// console, debug, the TEE and the agent. The order is the runtime's: it is
// what the TEE measures (TDX RTMR2, the SNP kernel-hashes table).
//
// It leaves out what only a pod or the node decides at sandbox creation:
// the kernel_params and kernel_verity_params annotations of a pod (when
// the configuration's enable_annotations allows them) and fips=1 on a host
// in FIPS mode (katautils checkForFIPS).
func KataCmdline(config []byte, name string, host KataHost) (string, error) {
	return KataCmdlineFiles([]KataConfigFile{{Name: name, Data: config}}, host)
}

// KataConfigFile is one file of a Kata configuration: the main file or
// a drop-in of its config.d directory.
type KataConfigFile struct {
	Name string
	Data []byte
}

// KataCmdlineFiles is KataCmdline for a main configuration file (files[0])
// and the drop-ins of its config.d directory, in the order Kata reads them
// (by file name): each key a drop-in sets replaces the one before
// (katautils decodeDropIns), tables merge key by key.
func KataCmdlineFiles(files []KataConfigFile, host KataHost) (string, error) {
	if len(files) == 0 {
		return "", fmt.Errorf("no Kata configuration file given")
	}
	name := files[0].Name
	merged := map[string]any{}
	for _, f := range files {
		var m map[string]any
		if err := toml.Unmarshal(f.Data, &m); err != nil {
			return "", fmt.Errorf("%s: not a Kata configuration file: %w", f.Name, err)
		}
		mergeTOML(merged, m)
	}
	if len(files) > 1 {
		name = fmt.Sprintf("%s with %d drop-ins", name, len(files)-1)
	}
	b, err := toml.Marshal(merged)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var c kataQEMUConfig
	if err := toml.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("%s: not a Kata configuration file: %w", name, err)
	}
	h, ok := c.Hypervisor["qemu"]
	if !ok || len(c.Hypervisor) != 1 {
		return "", fmt.Errorf("%s: expected exactly one hypervisor table, [hypervisor.qemu] (the Go runtime's QEMU): the command line of other hypervisors is not modelled", name)
	}
	if h.MachineType != "" && h.MachineType != "q35" {
		return "", fmt.Errorf("%s: hypervisor.qemu.machine_type %q: only q35 (x86_64) is modelled", name, h.MachineType)
	}
	agent := c.Agent["kata"]

	// qemu_amd64.go: the architecture's parameters, then intel_iommu/iommu
	// for enable_iommu (newQemuArch).
	params := []kataParam{
		{"tsc", "reliable"}, {"no_timer_check", ""}, {"rcupdate.rcu_expedited", "1"},
		{"i8042.direct", "1"}, {"i8042.dumbkbd", "1"}, {"i8042.nopnp", "1"}, {"i8042.noaux", "1"},
		{"noreplace-smp", ""}, {"reboot", "k"}, {"cryptomgr.notests", ""}, {"net.ifnames", "0"},
		{"pci", "lastbus=0"},
	}
	if h.IOMMU {
		params = append(params, kataParam{"intel_iommu", "on"}, kataParam{"iommu", "pt"})
	}
	// A confidential guest never gets an NVDIMM (newQemuArch).
	noNvdimm := h.DisableImageNvdimm || h.ConfidentialGuest
	image := h.Image != ""
	switch {
	case image && h.Initrd != "":
		return "", fmt.Errorf("%s: hypervisor.qemu sets both image and initrd: Kata refuses that (one of them is the guest's root)", name)
	case !image && h.Initrd == "":
		return "", fmt.Errorf("%s: hypervisor.qemu sets neither image nor initrd: Kata needs one of them", name)
	}
	if image {
		// handleImagePath: the root device, its flags and type, appended
		// when the architecture is set up, before the console.
		root, err := kataRootParams(h.RootfsType, noNvdimm, !noNvdimm, h.KernelVerityParams)
		if err != nil {
			return "", fmt.Errorf("%s: hypervisor.qemu: %w", name, err)
		}
		params = append(params, root...)
	}
	// appendConsole, when the devices are built.
	if h.LegacySerial {
		params = append(params, kataParam{"console", "ttyS0"})
	} else {
		params = append(params, kataParam{"console", "hvc0"}, kataParam{"console", "hvc1"})
	}
	// kernelParameters: debug or quiet (plus systemd's status switches when
	// the guest boots an image with systemd), panic, nr_cpus, selinux.
	if h.Debug {
		params = append(params, kataParam{"debug", ""})
		if image {
			params = append(params, kataParam{"systemd.show_status", "true"}, kataParam{"systemd.log_level", "debug"})
		}
	} else {
		params = append(params, kataParam{"quiet", ""})
		if image {
			params = append(params, kataParam{"systemd.show_status", "false"})
		}
	}
	params = append(params, kataParam{"panic", "1"})
	if !h.ConfidentialGuest {
		if host.CPUs < 1 {
			return "", fmt.Errorf("%s: hypervisor.qemu.confidential_guest is not set: the guest's nr_cpus depends on the host's processor count, which was not given (reference values exist for confidential guests only)", name)
		}
		params = append(params, kataParam{"nr_cpus", strconv.Itoa(kataMaxVCPUs(h.DefaultMaxVCPUs, host.CPUs))})
	}
	if h.DisableGuestSeLinux {
		params = append(params, kataParam{"selinux", "0"})
	} else {
		params = append(params, kataParam{"selinux", "1"})
	}
	// The configuration's own list (katautils SetKernelParams): systemd's
	// unit for an image, the SCSI scan mode, the agent's options, and the
	// file's kernel_params last so that they win.
	if image {
		params = append(params, kataParam{"systemd.unit", "kata-containers.target"},
			kataParam{"systemd.mask", "systemd-networkd.service"}, kataParam{"systemd.mask", "systemd-networkd.socket"})
	}
	switch h.BlockDeviceDriver {
	case "", "virtio-scsi":
		params = append(params, kataParam{"scsi_mod.scan", "none"})
	case "virtio-blk", "virtio-mmio", "nvdimm", "virtio-blk-ccw":
	default:
		return "", fmt.Errorf("%s: hypervisor.qemu.block_device_driver %q: expected virtio-scsi, virtio-blk, virtio-mmio, nvdimm or virtio-blk-ccw", name, h.BlockDeviceDriver)
	}
	params = append(params, kataAgentParams(agent)...)
	for _, f := range kataParamFields(h.KernelParams) {
		k, v, _ := strings.Cut(f, "=")
		params = append(params, kataParam{k, v})
	}
	for i, e := range h.Extensions {
		if e.Name == "" {
			return "", fmt.Errorf("%s: hypervisor.qemu.guest_extension_images[%d]: no name", name, i)
		}
		if strings.TrimSpace(e.VerityParams) != "" {
			if _, err := parseKataVerity(e.VerityParams); err != nil {
				return "", fmt.Errorf("%s: hypervisor.qemu.guest_extension_images[%d] (%s).verity_params: %w", name, i, e.Name, err)
			}
		}
		params = append(params, kataParam{"kata.extension." + e.Name + ".verity_params", e.VerityParams})
	}
	out := make([]string, 0, len(params))
	for _, p := range params {
		if s := p.String(); s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, " "), nil
}

// kataMaxVCPUs is Kata's default_maxvcpus resolution: 0 or more than the
// host has means the host's count, and never more than QEMU's 240 on x86.
func kataMaxVCPUs(req uint32, hostCPUs int) int {
	n := int(req)
	if n == 0 || n >= hostCPUs {
		n = hostCPUs
	}
	return min(n, 240)
}

// kataAgentParams are the agent's options Kata passes on the command line
// (virtcontainers KataAgentKernelParams). agent.container_pipe_size comes
// from a pod annotation only, never from the file.
func kataAgentParams(a kataAgent) []kataParam {
	var p []kataParam
	if a.Debug {
		p = append(p, kataParam{"agent.log", "debug"})
	}
	if a.Tracing {
		p = append(p, kataParam{"agent.trace", "true"})
	}
	if a.DebugConsoleEnabled {
		p = append(p, kataParam{"agent.debug_console", ""}, kataParam{"agent.debug_console_vport", "1026"})
	}
	if a.CdhAPITimeout > 0 {
		p = append(p, kataParam{"agent.cdh_api_timeout", strconv.FormatUint(uint64(a.CdhAPITimeout), 10)})
	}
	if a.LaunchProcessTimeout > 0 {
		p = append(p, kataParam{"agent.launch_process_timeout", strconv.FormatUint(uint64(a.LaunchProcessTimeout), 10)})
	}
	if a.VisibleCdiDevices {
		p = append(p, kataParam{"agent.visible_cdi_devices", "true"})
	}
	return p
}

// kataParamFields splits kernel_params at spaces outside double quotes
// (virtcontainers KernelParamFields: a dm-mod.create="..." value keeps its
// spaces).
func kataParamFields(s string) []string {
	var out []string
	start, quoted := 0, false
	for i, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
		case c == ' ' && !quoted:
			if f := strings.TrimSpace(s[start:i]); f != "" {
				out = append(out, f)
			}
			start = i + 1
		}
	}
	if f := strings.TrimSpace(s[start:]); f != "" {
		out = append(out, f)
	}
	return out
}

// kataVerity is a parsed kernel_verity_params value.
type kataVerity struct {
	rootHash, salt                           string
	dataBlocks, dataBlockSize, hashBlockSize uint64
}

// parseKataVerity reads "root_hash=...,salt=...,data_blocks=N,
// data_block_size=N,hash_block_size=N" as Kata's ParseKernelVerityParams
// does; an empty value means no dm-verity (nil).
func parseKataVerity(s string) (*kataVerity, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	vals := map[string]string{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q: expected key=value", f)
		}
		vals[k] = v
	}
	v := &kataVerity{rootHash: vals["root_hash"], salt: vals["salt"]}
	if v.rootHash == "" {
		return nil, fmt.Errorf("no root_hash")
	}
	for _, f := range []struct {
		name string
		to   *uint64
	}{{"data_blocks", &v.dataBlocks}, {"data_block_size", &v.dataBlockSize}, {"hash_block_size", &v.hashBlockSize}} {
		s, ok := vals[f.name]
		if !ok || s == "" {
			return nil, fmt.Errorf("no %s", f.name)
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s %q: expected a decimal number", f.name, s)
		}
		if n == 0 {
			return nil, fmt.Errorf("%s: must be non-zero", f.name)
		}
		*f.to = n
	}
	if v.salt == "" {
		return nil, fmt.Errorf("no salt")
	}
	if v.dataBlockSize%512 != 0 || v.hashBlockSize%512 != 0 {
		return nil, fmt.Errorf("data_block_size %d and hash_block_size %d: expected multiples of 512", v.dataBlockSize, v.hashBlockSize)
	}
	return v, nil
}

// kataRootParams are the root filesystem parameters of an image
// (virtcontainers GetKernelRootParams): dm-verity over the image's two
// partitions when kernel_verity_params is set, else the image's first
// partition on NVDIMM (DAX) or virtio-blk.
func kataRootParams(fsType string, noNvdimm, dax bool, verity string) ([]kataParam, error) {
	v, err := parseKataVerity(verity)
	if err != nil {
		return nil, fmt.Errorf("kernel_verity_params: %w", err)
	}
	if fsType == "" {
		fsType = "ext4"
	}
	var flags string
	switch fsType {
	case "erofs", "xfs":
		flags = "ro"
	case "ext4":
		flags = "data=ordered,errors=remount-ro ro"
	default:
		return nil, fmt.Errorf("rootfs_type %q: expected ext4, xfs or erofs", fsType)
	}
	if v != nil {
		root, hash := "/dev/pmem0p1", "/dev/pmem0p2"
		if noNvdimm {
			root, hash = "/dev/vda1", "/dev/vda2"
		}
		table := fmt.Sprintf("dm-verity,,,ro,0 %d verity 1 %s %s %d %d %d 0 sha256 %s %s",
			v.dataBlockSize/512*v.dataBlocks, root, hash, v.dataBlockSize, v.hashBlockSize, v.dataBlocks, v.rootHash, v.salt)
		return []kataParam{{"dm-mod.create", `"` + table + `"`}, {"root", "/dev/dm-0"}, {"rootflags", flags}, {"rootfstype", fsType}}, nil
	}
	root := "/dev/pmem0p1"
	if noNvdimm {
		root = "/dev/vda1"
	}
	if dax {
		flags = "dax," + flags
		if fsType != "ext4" {
			flags = "dax ro"
		}
	}
	return []kataParam{{"root", root}, {"rootflags", flags}, {"rootfstype", fsType}}, nil
}

// mergeTOML sets every key of src in dst: tables merge recursively, any
// other value replaces dst's.
func mergeTOML(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeTOML(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// maxKataConfigFile bounds one Kata configuration file or drop-in: they
// are tens of KiB.
const maxKataConfigFile = 4 << 20

// KataConfigFS reads the files of a Kata configuration: a host root
// (hostfs.Writable, paths resolved inside it) or this machine
// (LocalKataConfigFS).
type KataConfigFS interface {
	// ReadFileMax reads a regular file of at most max bytes.
	ReadFileMax(name string, max int64) ([]byte, error)
	ReadDir(name string) ([]fs.DirEntry, error)
}

// LocalKataConfigFS reads this machine's files.
type LocalKataConfigFS struct{}

// ReadFileMax reads a regular file (hostfs.OpenRegular) of at most max
// bytes.
func (LocalKataConfigFS) ReadFileMax(name string, max int64) ([]byte, error) {
	f, err := hostfs.OpenRegular(name, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(hostfs.LimitedReader(f, max))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return b, nil
}

// ReadDir lists a directory.
func (LocalKataConfigFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// ReadKataConfigFiles reads a Kata configuration file and, as the Kata
// runtime does, every file of the config.d directory beside it, by name
// (katautils decodeDropIns). Each must be a regular file.
func ReadKataConfigFiles(fsys KataConfigFS, path string) ([]KataConfigFile, error) {
	read := func(p string) (KataConfigFile, error) {
		b, err := fsys.ReadFileMax(p, maxKataConfigFile)
		if err != nil {
			return KataConfigFile{}, err
		}
		return KataConfigFile{Name: p, Data: b}, nil
	}
	main, err := read(path)
	if err != nil {
		return nil, err
	}
	files := []KataConfigFile{main}
	dir := filepath.Join(filepath.Dir(path), "config.d")
	entries, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return files, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading Kata's drop-in directory %s: %w", dir, err)
	}
	for _, e := range entries { // sorted by name, as Kata reads them
		f, err := read(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("Kata drop-in: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}
