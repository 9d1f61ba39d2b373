package discover

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/lazyre"
)

// pathDirs are the PATH directories of a host, in the usual order.
var pathDirs = []string{"usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin"}

// kataDirs are the install prefixes of berth install, kata-deploy and the
// CoCo operator, which bring their own hypervisors and shims: the binaries
// a platform's rendered configuration runs.
var kataDirs = []string{"opt/berth/bin", "opt/kata/bin", "opt/confidential-containers/bin"}

// distributionBinDirs are where distributions keep the containerd they
// bundle, keyed by distribution name as in platform.Layouts.
var distributionBinDirs = map[string]string{
	"k3s":      "var/lib/rancher/k3s/data/current/bin",
	"rke2":     "var/lib/rancher/rke2/bin",
	"k0s":      "var/lib/k0s/bin",
	"microk8s": "snap/microk8s/current/bin",
}

// binarySpec is one component to look for.
type binarySpec struct {
	// name is facts.Binary.Name.
	name string
	// files are candidate paths relative to the root.
	files []string
	parse versionParser
	// marker starts the `--version` line when the binary holds it as one
	// string literal (C binaries); "" when it does not.
	marker string
	// modules are the Go module paths of the component's own builds, for
	// its build info; none for non-Go binaries.
	modules []string
	// packages are the Debian packages that ship the component, tried in
	// order.
	packages []string
	// versionFlag is the flag that prints the version, when it is not
	// --version (StratoVirt's own argument parser takes -V).
	versionFlag string
}

// versionParser extracts the version, and the distributor build when the
// output names one, from what `<binary> --version` printed.
type versionParser func(out string) (version, vendor string, ok bool)

// in returns dir/file for every dir.
func in(dirs []string, files ...string) []string {
	var out []string
	for _, d := range dirs {
		for _, f := range files {
			out = append(out, path.Join(d, f))
		}
	}
	return out
}

// binarySpecs lists the hypervisors and helpers berth reports. The
// distribution's bundled directory comes first for containerd, as that is
// the containerd its kubelet talks to.
func binarySpecs(distribution string) []binarySpec {
	kataPath := append(slices.Clone(pathDirs), kataDirs...)
	var containerdDirs []string
	if d, ok := distributionBinDirs[distribution]; ok {
		containerdDirs = append(containerdDirs, d)
	}
	containerdDirs = append(containerdDirs, pathDirs...)
	for _, name := range slices.Sorted(maps.Keys(distributionBinDirs)) {
		if d := distributionBinDirs[name]; !slices.Contains(containerdDirs, d) {
			containerdDirs = append(containerdDirs, d)
		}
	}
	kataModules := []string{"github.com/kata-containers/kata-containers/src/runtime"}
	return []binarySpec{
		{name: "qemu", files: append(in(kataPath, "qemu-system-x86_64", "qemu-system-aarch64"),
			"usr/libexec/qemu-kvm", "usr/bin/qemu-kvm"), parse: parseQEMUVersion,
			marker: "QEMU emulator version ", packages: []string{"qemu-system-x86", "qemu-system-arm", "qemu-kvm"}},
		{name: "cloud-hypervisor", files: in(kataPath, "cloud-hypervisor"), parse: parseCloudHypervisorVersion,
			packages: []string{"cloud-hypervisor"}},
		{name: "firecracker", files: in(kataPath, "firecracker"), parse: parseFirecrackerVersion},
		// Kata's Makefiles point StratoVirt and OpenVMM at /usr/bin
		// (STRATOVIRTPATH, OPENVMMPATH under PREFIXDEPS); kata-deploy and
		// berth install them with the rest of the payload.
		{name: "stratovirt", files: in(kataPath, "stratovirt"), parse: parseStratoVirtVersion,
			versionFlag: "-V", packages: []string{"stratovirt"}},
		{name: "openvmm", files: in(kataPath, "openvmm"), parse: parseOpenVMMVersion},
		{name: "virtiofsd", files: append([]string{"usr/libexec/virtiofsd", "usr/lib/qemu/virtiofsd",
			"opt/kata/libexec/virtiofsd", "opt/confidential-containers/libexec/virtiofsd"},
			in(kataPath, "virtiofsd")...), parse: parseVirtiofsdVersion,
			// QEMU's C virtiofsd; the Rust one formats its line at run time.
			marker: "virtiofsd version ", packages: []string{"virtiofsd", "qemu-system-common"}},
		{name: "nydus-snapshotter", files: in(kataPath, "containerd-nydus-grpc", "nydus-snapshotter"), parse: parseNydusVersion,
			modules: []string{"github.com/containerd/nydus-snapshotter"}},
		{name: "kata-shim", files: in(kataPath, "containerd-shim-kata-v2"), parse: parseKataVersion,
			modules: kataModules, packages: []string{"kata-containers"}},
		{name: "kata-runtime", files: in(kataPath, "kata-runtime"), parse: parseKataVersion,
			modules: kataModules, packages: []string{"kata-containers"}},
		{name: "containerd", files: in(containerdDirs, "containerd"), parse: parseContainerdVersion,
			modules: upstreamContainerd, packages: []string{"containerd", "containerd.io"}},
		{name: "crio", files: in(pathDirs, "crio"), parse: parseCRIOVersion,
			modules: []string{"github.com/cri-o/cri-o"}, packages: []string{"cri-o"}},
	}
}

// maxVersionRuns bounds the commands run at once: each is a process start
// on a host that is busy running workloads.
const maxVersionRuns = 4

// findBinaries looks for every component and finds each binary's version,
// concurrently: from a static source when one answers, else by asking the
// binary. A binary reached through several paths (a merged /usr, a symlink
// into opt/kata) is reported once, under the first path in search order.
func findBinaries(ctx context.Context, s *session, distribution string) []facts.Binary {
	var out []facts.Binary
	var found []foundBinary
	seen := map[string]bool{}
	specs := binarySpecs(distribution)
	lookup := newStaticLookup(s, specs)
	resolver := newPathResolver(s.root.FS())
	for _, spec := range specs {
		for _, p := range spec.files {
			real, ok := resolver.resolve(p)
			if !ok || seen[real] || resolver.component(real).dir {
				continue
			}
			seen[real] = true
			out = append(out, facts.Binary{Name: spec.name, Path: "/" + p})
			found = append(found, foundBinary{spec: spec, path: p, real: real})
		}
	}

	var wg sync.WaitGroup
	sem := make(chan struct{}, maxVersionRuns)
	reasons := make([]string, len(out))
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			reasons[i] = binaryVersion(ctx, s.root, lookup, &out[i], found[i])
		}()
	}
	wg.Wait()
	for i, b := range out {
		if reasons[i] != "" {
			s.unknownf("binaries."+b.Name+".version", "%s", reasons[i])
		}
	}
	return out
}

// foundBinary is a binary found for spec at path, whose symlinks resolve
// to real (both relative to the root).
type foundBinary struct {
	spec       binarySpec
	path, real string
}

// binaryVersion fills b's version from, in order: the static version a
// snapshot recorded; on a live root, the static sources (recording their
// answer for snapshots); the output of `<path> --version`, run on a live
// root or recorded. It returns why the version is unknown, or "".
func binaryVersion(ctx context.Context, root hostfs.Root, lookup *staticLookup, b *facts.Binary, fb foundBinary) string {
	var sv staticVersion
	if err := root.Probe(versionProbe(b.Path), &sv); err == nil && versionShape.MatchString(sv.Version) {
		b.Version, b.Vendor, b.VersionFrom, b.Recorded = sv.Version, sv.Vendor, sv.From, true
		return ""
	}
	if sv, ok := lookup.lookup(fb.spec, fb.path, fb.real); ok {
		b.Version, b.Vendor, b.VersionFrom = sv.Version, sv.Vendor, sv.From
		hostfs.RecordProbe(root, versionProbe(b.Path), sv)
		return ""
	}
	parse := fb.spec.parse
	argv := []string{b.Path, cmp.Or(fb.spec.versionFlag, "--version")}
	res, err := root.Run(ctx, argv...)
	cmd := strings.Join(argv, " ")
	switch {
	case errors.Is(err, hostfs.ErrOffline):
		return facts.ReasonOffline + ": no recorded output of " + cmd
	case err != nil:
		return facts.ReasonNotRun + ": " + err.Error()
	}
	b.Recorded = res.Recorded
	// Some tools print their version on stderr (old virtiofsd, firecracker
	// builds); try stdout first.
	for _, out := range []string{res.Stdout, res.Stderr} {
		if v, vendor, ok := parse(out); ok {
			b.Version, b.Vendor, b.VersionFrom = v, vendor, fromRun
			return ""
		}
	}
	first := strings.TrimSpace(res.Stdout + "\n" + res.Stderr)
	if i := strings.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if len(first) > 120 {
		first = first[:120]
	}
	return facts.ReasonUnparseable + ": " + cmd + " (exit " + strconv.Itoa(res.ExitCode) + ") printed " + strconv.Quote(first)
}

// resolveInRoot follows symlinks in every component of p inside the root
// (an absolute target is taken relative to the root, as the host sees it)
// and returns the real path. ok is false when p does not exist, escapes
// the root, or loops.
func resolveInRoot(fsys hostfs.FS, p string) (string, bool) {
	return newPathResolver(fsys).resolve(p)
}

// pathResolver resolves paths as resolveInRoot does, remembering what each
// path component it looked at is: the candidates of findBinaries share
// their first components (usr, usr/bin, a bin -> usr/bin link), and each
// look is an Lstat of three system calls. Not safe for concurrent use.
type pathResolver struct {
	fsys hostfs.FS
	seen map[string]pathComponent
}

// pathComponent is what a path inside the root is: missing (or
// unreadable), a symlink with its target, or anything else.
type pathComponent struct {
	missing bool
	link    bool
	dir     bool
	target  string
}

func newPathResolver(fsys hostfs.FS) *pathResolver {
	return &pathResolver{fsys: fsys, seen: map[string]pathComponent{}}
}

func (r *pathResolver) component(p string) pathComponent {
	if c, ok := r.seen[p]; ok {
		return c
	}
	var c pathComponent
	st, err := r.fsys.Lstat(p)
	switch {
	case err != nil:
		c.missing = true
	case st.IsDir():
		c.dir = true
	case st.Mode()&fs.ModeSymlink != 0:
		c.link = true
		// A link whose text cannot be read ends the resolution as a
		// missing component does.
		if c.target, err = r.fsys.ReadLink(p); err != nil {
			c.missing = true
		}
	}
	r.seen[p] = c
	return c
}

func (r *pathResolver) resolve(p string) (string, bool) {
	const maxHops = 40
	// Every component is looked at once per run: a candidate under a
	// directory that is missing (opt/kata/bin on most hosts) costs
	// nothing more, and one reached through a link (bin -> usr/bin on a
	// merged /usr) is the path it leads to, looked at once.
	parts := strings.Split(p, "/")
	cur := ""
	hops := 0
	for i := 0; i < len(parts); i++ {
		if parts[i] == "" || parts[i] == "." {
			continue
		}
		if parts[i] == ".." {
			if cur == "" || cur == "." {
				return "", false
			}
			cur = path.Dir(cur)
			if cur == "." {
				cur = ""
			}
			continue
		}
		next := path.Join(cur, parts[i])
		c := r.component(next)
		if c.missing {
			return "", false
		}
		if !c.link {
			cur = next
			continue
		}
		hops++
		if hops > maxHops {
			return "", false
		}
		target := c.target
		rest := parts[i+1:]
		if strings.HasPrefix(target, "/") {
			cur = ""
			target = strings.TrimPrefix(target, "/")
		}
		parts = append(strings.Split(target, "/"), rest...)
		i = -1
	}
	if cur == "" {
		return "", false
	}
	return cur, true
}

// numVersion is a constant so that the patterns below are joined at
// compile time, not by every process's initialisation.
const numVersion = `v?(\d+\.\d+(?:\.\d+)?)`

var (
	qemuRe     = lazyre.New(`QEMU emulator version (\d+\.\d+(?:\.\d+)?)(?:[^\S\n]*\(([^)\n]*)\))?`)
	clhRe      = lazyre.New(`(?m)^cloud-hypervisor:?\s+` + numVersion)
	fcRe       = lazyre.New(`(?mi)^firecracker\s+` + numVersion)
	virtiofsRe = lazyre.New(`(?m)^virtiofsd(?:\s+backend|\s+version)?\s+` + numVersion + `(?:[^\S\n]*\(([^)\n]*)\))?`)
	ctrdRe     = lazyre.New(`(?m)^containerd\s+(\S+)\s+` + numVersion)
	crioRe     = lazyre.New(`(?m)^(?:crio version|Version:)[ \t]+` + numVersion)
	kataRtRe   = lazyre.New(`(?m)^kata-runtime\s*:\s*` + numVersion)
	kataShimRe = lazyre.New(`Kata Containers containerd shim.*?version:\s*` + numVersion)
	nydusRe    = lazyre.New(`(?m)^\s*Version:\s*` + numVersion)
	stratoRe   = lazyre.New(`(?m)^StratoVirt\s+` + numVersion)
	openvmmRe  = lazyre.New(`(?m)^openvmm\s+` + numVersion)
)

// parseQEMUVersion reads "QEMU emulator version 8.2.2 (Debian
// 1:8.2.2+ds-0ubuntu1)": the parenthesis names the build.
func parseQEMUVersion(out string) (string, string, bool) {
	m := qemuRe.FindStringSubmatch(out)
	if m == nil {
		return "", "", false
	}
	return m[1], strings.TrimSpace(m[2]), true
}

// parseCloudHypervisorVersion reads "cloud-hypervisor v41.0.0".
func parseCloudHypervisorVersion(out string) (string, string, bool) {
	return firstGroup(clhRe, out)
}

// parseFirecrackerVersion reads "Firecracker v1.10.1".
func parseFirecrackerVersion(out string) (string, string, bool) {
	return firstGroup(fcRe, out)
}

// parseStratoVirtVersion reads "StratoVirt 2.4.0", what StratoVirt's
// argument parser prints for -V (util/src/arg_parser.rs show_version:
// the program name, a space, the version).
func parseStratoVirtVersion(out string) (string, string, bool) {
	return firstGroup(stratoRe, out)
}

// parseOpenVMMVersion reads "openvmm 0.1.0" (clap's version line: the
// program name and its version, with or without a leading v).
func parseOpenVMMVersion(out string) (string, string, bool) {
	return firstGroup(openvmmRe, out)
}

// parseVirtiofsdVersion reads the Rust virtiofsd's "virtiofsd backend
// 1.10.1" (older releases print "virtiofsd 1.5.0"), and the C virtiofsd
// that QEMU shipped until 7.2: "virtiofsd version 7.2.22 (Debian
// 1:7.2+dfsg-7+deb12u18+b3)", whose version is QEMU's.
func parseVirtiofsdVersion(out string) (string, string, bool) {
	m := virtiofsRe.FindStringSubmatch(out)
	if m == nil {
		return "", "", false
	}
	return m[1], strings.TrimSpace(m[2]), true
}

// upstreamContainerd are the module paths of upstream containerd builds.
var upstreamContainerd = []string{"github.com/containerd/containerd", "github.com/containerd/containerd/v2"}

// parseContainerdVersion reads "containerd github.com/containerd/
// containerd/v2 v2.0.2 <commit>"; a package other than upstream's
// (containerd.io from Docker, github.com/k3s-io/containerd) is the vendor.
func parseContainerdVersion(out string) (string, string, bool) {
	m := ctrdRe.FindStringSubmatch(out)
	if m == nil {
		return "", "", false
	}
	vendor := m[1]
	if slices.Contains(upstreamContainerd, vendor) {
		vendor = ""
	}
	return m[2], vendor, true
}

// parseCRIOVersion reads "crio version 1.31.0" (older) or the
// "Version:  1.31.0" line of the multi-line output.
func parseCRIOVersion(out string) (string, string, bool) {
	return firstGroup(crioRe, out)
}

// parseKataVersion reads kata-runtime's "kata-runtime  : 3.13.0" or the
// shim's "Kata Containers containerd shim (Golang): id: ..., version:
// 3.13.0, commit: ...".
func parseKataVersion(out string) (string, string, bool) {
	if v, vendor, ok := firstGroup(kataRtRe, out); ok {
		return v, vendor, ok
	}
	return firstGroup(kataShimRe, out)
}

// parseNydusVersion reads containerd-nydus-grpc's "Version:    v0.15.0".
func parseNydusVersion(out string) (string, string, bool) {
	return firstGroup(nydusRe, out)
}

func firstGroup(re *lazyre.Regexp, out string) (string, string, bool) {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return "", "", false
	}
	return m[1], "", true
}
