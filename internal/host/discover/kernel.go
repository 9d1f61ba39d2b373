package discover

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// modulesOfInterest are the kernel modules berth reports.
var modulesOfInterest = []string{
	"9p", "9pnet", "9pnet_virtio", "ccp", "erofs", "fuse", "iommufd",
	"kvm", "kvm_amd", "kvm_intel", "kvm_pvm", "mshv", "mshv_root", "mshv_vtl", "overlay",
	"sev_guest", "tdx_guest", "tun", "vfio", "vfio_iommu_type1", "vfio_pci",
	"vfio_pci_core", "vhost", "vhost_net", "vhost_vsock", "virtiofs",
	"vmw_vsock_virtio_transport", "vsock",
}

// configOfInterest are the kernel-config options berth reports (without
// the CONFIG_ prefix).
var configOfInterest = []string{
	"9P_FS", "AMD_IOMMU", "AMD_MEM_ENCRYPT", "CGROUPS", "CGROUP_MISC",
	"CRYPTO_DEV_CCP_DD", "CRYPTO_DEV_SP_PSP", "DM_VERITY", "EROFS_FS", "FUSE_FS",
	"HIBERNATION", "INTEL_IOMMU", "INTEL_TDX_HOST", "IOMMUFD", "KVM", "KVM_AMD",
	"KVM_AMD_SEV", "KVM_INTEL", "KVM_INTEL_TDX", "MEMCG", "NET_9P", "NET_9P_VIRTIO",
	"TUN", "VFIO", "VFIO_IOMMU_TYPE1", "VFIO_PCI", "VHOST", "VHOST_NET",
	"VHOST_VSOCK", "VIRTIO_FS", "VSOCKETS", "X86_SGX", "X86_SGX_KVM",
}

// maxConfigSize caps a decompressed kernel config.
const maxConfigSize = 4 << 20

func runKernel(_ context.Context, s *session, f *facts.Facts) {
	k := &f.Kernel
	release, relOK := s.readString("kernel.release", "proc/sys/kernel/osrelease")
	k.Release = release
	if cl, ok := s.procCmdline(); ok {
		k.Cmdline = cl
	}
	if !relOK {
		release = ""
	}
	// The configuration (often gzip'ed) and the modules are independent
	// reads of some milliseconds each: side by side on two cores.
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.kernelConfig(k, release)
	}()
	s.kernelModules(k, release, relOK)
	<-done
	if lines, src, ok := s.bootLines(); ok {
		k.BootLog, k.BootLogSource = lines, src
	}
}

// kernelModules fills k.Modules from proc/modules, modules.builtin and
// sys/module.
func (s *session) kernelModules(k *facts.Kernel, release string, relOK bool) {
	var loaded map[string]string // name: state
	if b, ok := s.readFile("kernel.modules", "proc/modules"); ok {
		var err error
		if loaded, err = parseProcModules(b); err != nil {
			s.unknownf("kernel.modules", "%s", parseReason("proc/modules", err))
			loaded = nil
		}
	}
	var builtin map[string]bool
	if relOK {
		for _, p := range []string{"lib/modules/" + release + "/modules.builtin", "usr/lib/modules/" + release + "/modules.builtin"} {
			if b, err := s.root.FS().ReadFile(p); err == nil {
				builtin = parseModulesBuiltin(b)
				break
			}
		}
	}
	// One listing of sys/module says which of the modules have a
	// directory there, instead of a lookup each (most are absent); a root
	// that cannot list it is asked module by module.
	inSys := func(name string) bool { return s.exists("sys/module/" + name) }
	if ents, err := s.root.FS().ReadDir("sys/module"); err == nil {
		listed := make(map[string]bool, len(modulesOfInterest))
		for _, e := range ents {
			if slices.Contains(modulesOfInterest, e.Name()) {
				listed[e.Name()] = true
			}
		}
		inSys = func(name string) bool { return listed[name] }
	}
	mods := map[string]facts.Module{}
	for _, name := range modulesOfInterest {
		var m facts.Module
		state, isLoaded := loaded[name]
		m.Loaded = isLoaded
		m.Builtin = builtin[name]
		dir := "sys/module/" + name
		if inSys(name) {
			if !m.Loaded && !s.exists(dir+"/initstate") {
				// sys/module/<m> without initstate is a built-in module
				// with parameters.
				m.Builtin = true
			} else if loaded == nil && s.exists(dir+"/initstate") {
				m.Loaded = true
			}
			// Read-only parameters are fixed once a module has finished
			// initialising (a built-in one before userspace starts); a
			// module still loading may yet change them (kvm_amd turns
			// sev off when the firmware refuses).
			settled := state == "Live" || (m.Builtin && !isLoaded)
			m.Params = s.moduleParams(name, settled)
		}
		if m.Present() {
			mods[name] = m
		}
	}
	if len(mods) > 0 {
		k.Modules = mods
	}
}

// moduleParams reads sys/module/<m>/parameters/*; unreadable parameters
// (some are write-only) are skipped. For a settled module with a cache,
// the read-only parameters are kept while the directory is the same one
// (a module reloaded gets a new one), and only the writable ones, which
// an administrator may change at any time, are read again.
func (s *session) moduleParams(name string, settled bool) map[string]string {
	dir := "sys/module/" + name + "/parameters"
	key := "modparams\x00" + dir
	var id fileID
	cacheable := false
	if settled {
		id, cacheable = s.cacheID(dir)
	}
	if cacheable {
		if v, ok := s.opt.Cache.get(key, id); ok {
			set := v.(paramSet)
			params := maps.Clone(set.fixed)
			if len(set.writable) > 0 {
				s.readParams(dir, set.writable, params)
			}
			return nonEmpty(params)
		}
	}
	ents, err := s.root.FS().ReadDir(dir)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	params := map[string]string{}
	s.readParams(dir, names, params)
	if cacheable {
		set := paramSet{fixed: map[string]string{}}
		for _, e := range ents {
			fi, err := e.Info()
			// What could not be read or typed is read again next time.
			switch v, ok := params[e.Name()]; {
			case e.IsDir():
			case ok && err == nil && fi.Mode().Perm()&0o222 == 0:
				set.fixed[e.Name()] = v
			default:
				set.writable = append(set.writable, e.Name())
			}
		}
		s.opt.Cache.put(key, set, id)
	}
	return nonEmpty(params)
}

// readParams reads the parameters names of dir into params.
func (s *session) readParams(dir string, names []string, params map[string]string) {
	// Read by name from the directory: kvm alone has 33 parameters.
	h := hostfs.OpenDirHandle(s.root.FS(), dir)
	defer h.Close()
	for _, n := range names {
		if b, err := h.ReadFile(n); err == nil {
			params[n] = parseModuleParam(b)
		}
	}
}

// paramSet is what is kept of a module's parameters: the values of the
// read-only ones, and the names of those read every time.
type paramSet struct {
	fixed    map[string]string
	writable []string
}

// nonEmpty is m, or nil when it is empty (Facts leave it out).
func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// parseModuleParam normalises a sysfs parameter value: trimmed, capped at
// 256 bytes, invalid UTF-8 and control characters replaced, so that a
// binary parameter cannot bloat or break Facts.
func parseModuleParam(b []byte) string {
	const maxLen = 256
	v := strings.TrimSpace(string(b))
	if len(v) > maxLen {
		v = v[:maxLen]
	}
	return strings.Map(func(r rune) rune {
		if r == 0xFFFD || r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(v, "?"))
}

// ParamBool interprets a Y/N module parameter: Y, y, 1 are true; N, n, 0
// false (old out-of-tree kernels print 1/0, kvm_amd.nested is an int).
func ParamBool(v string) (bool, bool) {
	switch strings.TrimSpace(v) {
	case "Y", "y", "1":
		return true, true
	case "N", "n", "0":
		return false, true
	}
	return false, false
}

// parseProcModules returns the loaded modules in proc/modules ("name size
// refcount deps state offset") with their state (Live, Loading,
// Unloading; empty on kernels that print none). A line with fewer than
// three fields or a non-numeric size is an error naming the line.
func parseProcModules(b []byte) (map[string]string, error) {
	loaded := map[string]string{}
	for n, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 3 || !allDigits(fields[1]) {
			return nil, &lineError{line: n + 1, msg: "expected \"name size refcount ...\""}
		}
		state := ""
		if len(fields) >= 5 {
			state = fields[4]
		}
		loaded[fields[0]] = state
	}
	return loaded, nil
}

// parseModulesBuiltin returns the names of built-in modules from
// modules.builtin ("kernel/arch/x86/kvm/kvm.ko"); names use "_" as the
// kernel does.
func parseModulesBuiltin(b []byte) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		base := path.Base(line)
		if i := strings.Index(base, ".ko"); i > 0 {
			base = base[:i]
		}
		out[strings.ReplaceAll(base, "-", "_")] = true
	}
	return out
}

// kernelConfig reads the first kernel config found.
func (s *session) kernelConfig(k *facts.Kernel, release string) {
	cands := []string{"proc/config.gz"}
	if release != "" {
		cands = append(cands,
			"boot/config-"+release,
			"lib/modules/"+release+"/config",
			"usr/lib/modules/"+release+"/config",
			"usr/src/linux-"+release+"/.config")
	}
	var reasons []string
	for _, p := range cands {
		var parseErr error
		cfg, err := cachedFrom(s, p, "kernelconfig\x00"+p, func() (map[string]string, error) {
			b, err := s.root.FS().ReadFile(p)
			if err != nil {
				return nil, err
			}
			var cfg map[string]string
			if strings.HasSuffix(p, ".gz") {
				cfg, parseErr = parseKernelConfigGzip(b)
			} else {
				cfg, parseErr = parseKernelConfig(b)
			}
			return cfg, parseErr
		})
		switch {
		case parseErr != nil:
			reasons = append(reasons, parseReason(p, parseErr))
			continue
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			reasons = append(reasons, ReadReason(p, err))
			continue
		}
		// A copy: the cached map outlives these Facts.
		k.Config, k.ConfigSource = maps.Clone(cfg), p
		return
	}
	if len(reasons) == 0 {
		reasons = append(reasons, facts.ReasonMissing+": "+strings.Join(cands, ", "))
	}
	s.unknownf("kernel.config", "%s", strings.Join(reasons, "; "))
}

// parseKernelConfig returns the options of interest: "y", "m", a value
// for string or numeric options, or "n" when the option is not set or
// absent. Lines must be "CONFIG_X=value", "# CONFIG_X is not set",
// another comment, or blank; anything else is an error naming the line.
func parseKernelConfig(b []byte) (map[string]string, error) {
	p := newConfigParser()
	if err := p.lines(b); err != nil {
		return nil, err
	}
	return p.cfg, nil
}

// configChunk is how much of a compressed config is decompressed at a
// time.
const configChunk = 16 << 10

// parseKernelConfigGzip is parseKernelConfig for a gzip-compressed config
// (proc/config.gz), parsed as it is decompressed through a buffer of
// configChunk bytes: the whole text (100-250 KB) would be as many fresh
// pages of a heap that a short run never collects, each a page fault.
// A line longer than the buffer is refused.
func parseKernelConfigGzip(gz []byte) (map[string]string, error) {
	return parseKernelConfigGzipChunk(gz, configChunk)
}

// parseKernelConfigGzipChunk is parseKernelConfigGzip with a buffer of
// chunk bytes.
func parseKernelConfigGzipChunk(gz []byte, chunk int) (map[string]string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	p := newConfigParser()
	buf := make([]byte, chunk)
	have, total := 0, 0
	for {
		n, err := zr.Read(buf[have:])
		if total += n; total > maxConfigSize {
			return nil, fmt.Errorf("decompressed config larger than %d bytes", maxConfigSize)
		}
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return nil, err
		}
		data := buf[:have+n]
		whole := len(data) // at the end, the last line needs no newline
		if !eof {
			whole = bytes.LastIndexByte(data, '\n') + 1
			if whole == 0 && len(data) == len(buf) {
				return nil, &lineError{line: p.line + 1, msg: fmt.Sprintf("longer than %d bytes", chunk)}
			}
		}
		if err := p.lines(data[:whole]); err != nil {
			return nil, err
		}
		if eof {
			return p.cfg, nil
		}
		have = copy(buf, data[whole:])
	}
}

// configParser keeps the options of interest of a config read line by
// line, in pieces or whole.
type configParser struct {
	cfg  map[string]string
	line int // lines parsed so far
}

func newConfigParser() *configParser {
	cfg := make(map[string]string, len(configOfInterest))
	for _, o := range configOfInterest {
		cfg[o] = "n"
	}
	return &configParser{cfg: cfg}
}

// lines parses b, whole lines of which the last may lack its newline.
func (p *configParser) lines(b []byte) error {
	// Line by line over the bytes, converting only the values kept: a
	// config has thousands of lines and berth wants a few dozen.
	for len(b) > 0 {
		p.line++
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		line = bytes.TrimSpace(bytes.TrimRight(line, "\r"))
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok || !bytes.HasPrefix(k, []byte("CONFIG_")) || len(k) == len("CONFIG_") {
			return &lineError{line: p.line, msg: "expected CONFIG_NAME=value"}
		}
		name := k[len("CONFIG_"):]
		// Indexing with string(bytes) does not allocate.
		if _, want := p.cfg[string(name)]; want {
			p.cfg[string(name)] = string(bytes.Trim(v, "\""))
		}
	}
	return nil
}
