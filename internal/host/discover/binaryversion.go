package discover

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/lazyre"
)

// A binary's version is read, where possible, without running it: from the
// version line compiled into the file, from a Go binary's build info, or
// from the Debian package that installed it. Running `--version` costs a
// process start per binary (containerd ~32 ms, QEMU ~27 ms) and executes
// host code; the static sources cost a millisecond or two and execute
// nothing. They need the file itself, so they run on live roots only; a
// snapshot carries their answer as the probe "version:<path>".

// versionSource is one static source of a binary's version.
type versionSource int

const (
	// sourceFile is the `--version` line compiled into a C binary as a
	// string literal, found in its read-only data.
	sourceFile versionSource = iota
	// sourceBuildInfo is a Go binary's embedded module version or -X
	// version flag.
	sourceBuildInfo
	// sourcePackage is the Debian package database.
	sourcePackage
)

// sources returns the static sources to try for spec, most precise first:
// the binary knows its own patch release where its package may not (QEMU's
// package says 7.2, the binary 7.2.22), so the file and build info come
// before the package database.
func (spec binarySpec) sources() []versionSource {
	var out []versionSource
	if spec.marker != "" {
		out = append(out, sourceFile)
	}
	if len(spec.modules) > 0 {
		out = append(out, sourceBuildInfo)
	}
	if len(spec.packages) > 0 {
		out = append(out, sourcePackage)
	}
	return out
}

// staticVersion is what a static source answered; a snapshot records it
// under the probe name versionProbe(path).
type staticVersion struct {
	Version string `json:"version"`
	Vendor  string `json:"vendor,omitempty"`
	// From is facts.Binary.VersionFrom.
	From string `json:"from"`
}

// versionProbe names the recorded static version of the binary at p (an
// absolute path inside the root).
func versionProbe(p string) string { return "version:" + p }

// Version sources as reported in facts.Binary.VersionFrom.
const (
	fromFile      = "file"
	fromBuildInfo = "build info"
	fromPackage   = "package "
	fromRun       = "--version"
)

// maxRodata bounds how much read-only data is searched for a version
// marker: QEMU's .rodata is ~1.8 MB; a larger section is not a binary we
// know, and reading it would cost more than running it.
const maxRodata = 32 << 20

// maxMarkerLine bounds the version line taken after a marker.
const maxMarkerLine = 256

// dpkgDir is the Debian package database, relative to the root.
const dpkgDir = "var/lib/dpkg"

// staticLookup answers binary versions from static sources for one
// discovery run. The package database is scanned at most once, and only
// for the packages the specs name; it is safe for concurrent use.
type staticLookup struct {
	s   *session
	raw hostfs.RawReader
	// packages are the package names any spec names.
	packages map[string]bool

	dpkgOnce sync.Once
	dpkg     map[string][]dpkgPackage
	dpkgErr  error
}

// newStaticLookup returns the lookup for the session's root, or nil when
// the root cannot read files raw (an offline root: its snapshot recorded
// the answers).
func newStaticLookup(s *session, specs []binarySpec) *staticLookup {
	raw, ok := s.root.(hostfs.RawReader)
	if !ok || !s.root.Live() {
		return nil
	}
	l := &staticLookup{s: s, raw: raw, packages: map[string]bool{}}
	for _, s := range specs {
		for _, p := range s.packages {
			l.packages[p] = true
		}
	}
	return l
}

// lookup tries spec's static sources for the binary found at p (relative
// to the root) whose symlinks resolve to real. ok is false when none
// answered; the caller then runs the binary.
func (l *staticLookup) lookup(spec binarySpec, p, real string) (staticVersion, bool) {
	if l == nil {
		return staticVersion{}, false
	}
	cache := l.s.opt.Cache
	if cache == nil {
		return l.fromSources(spec, p, real)
	}
	// Identified before the sources are read: a file replaced while they
	// are is read again next time.
	bin, dpkg, cacheable := l.ids(real)
	if !cacheable {
		return l.fromSources(spec, p, real)
	}
	key := versionKey(spec, p, real)
	if v, ok := cache.get(key, bin, dpkg); ok {
		return v.(staticVersion), true
	}
	sv, ok := l.fromSources(spec, p, real)
	if ok {
		cache.put(key, sv, bin, dpkg)
	}
	return sv, ok
}

// fromSources tries spec's static sources in order.
func (l *staticLookup) fromSources(spec binarySpec, p, real string) (staticVersion, bool) {
	for _, src := range spec.sources() {
		var (
			sv  staticVersion
			err error
		)
		switch src {
		case sourceFile:
			sv, err = l.fromFile(spec, real)
		case sourceBuildInfo:
			sv, err = l.fromBuildInfo(spec, real)
		case sourcePackage:
			sv, err = l.fromPackage(spec, p, real)
		}
		if err == nil {
			return sv, true
		}
		if log := l.s.opt.Log; log != nil {
			log.Debug("static version source did not answer", "binary", "/"+p, "source", src, "err", err)
		}
	}
	return staticVersion{}, false
}

// errNoVersion says that a source looked and did not find a version.
var errNoVersion = errors.New("no version found")

// fromFile finds spec.marker in the read-only data of the ELF file real
// and parses the line it starts, as `--version` would print it.
func (l *staticLookup) fromFile(spec binarySpec, real string) (staticVersion, error) {
	f, err := l.raw.OpenRaw(real)
	if err != nil {
		return staticVersion{}, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return staticVersion{}, fmt.Errorf("reading %s: %w", real, err)
	}
	for _, sec := range ef.Sections {
		if !isRodata(sec) {
			continue
		}
		if sec.Size > maxRodata {
			return staticVersion{}, fmt.Errorf("reading %s: section %s is %d bytes, more than the %d searched", real, sec.Name, sec.Size, maxRodata)
		}
		v, vendor, ok, err := sectionMarkerVersion(sec, spec.marker, spec.parse)
		if err != nil {
			return staticVersion{}, fmt.Errorf("reading %s section %s: %w", real, sec.Name, err)
		}
		if ok {
			return staticVersion{Version: v, Vendor: vendor, From: fromFile}, nil
		}
	}
	return staticVersion{}, fmt.Errorf("%s: %w: no %q in its read-only data", real, errNoVersion, spec.marker)
}

// rodataChunk is how much of a section sectionMarkerVersion reads at a
// time: QEMU's .rodata is ~1.8 MB and its version line may be anywhere;
// reading it in chunks stops at the line (half the section on average)
// and never holds the whole section in memory. The buffer is fresh
// memory, a page fault per 4 KiB the first read fills (3-4 µs each in a
// VM, and freed again at exit): 256 KiB chunks cost ~80 faults per check,
// 32 KiB ones ~16, for a few more pread calls (~3 µs each).
const rodataChunk = 32 << 10

// sectionMarkerVersion is markerVersion over sec, read a chunk at a time.
// Consecutive chunks overlap by the longest line taken after a marker,
// so that a line across a chunk boundary is seen whole in the next one.
func sectionMarkerVersion(sec *elf.Section, marker string, parse versionParser) (string, string, bool, error) {
	overlap := int64(len(marker) + maxMarkerLine)
	buf := make([]byte, min(int64(rodataChunk), int64(sec.Size)))
	for off := int64(0); off < int64(sec.Size); {
		n := min(int64(len(buf)), int64(sec.Size)-off)
		if _, err := sec.ReadAt(buf[:n], off); err != nil && !(errors.Is(err, io.EOF) && n == int64(sec.Size)-off) {
			return "", "", false, err
		}
		chunk := buf[:n]
		last := off+n >= int64(sec.Size)
		limit := len(chunk)
		if !last {
			// A marker starting in the overlap is looked at in the next
			// chunk, which holds its whole line.
			limit -= int(overlap)
		}
		if v, vendor, ok := markerVersionBefore(chunk, limit, marker, parse); ok {
			return v, vendor, true, nil
		}
		if last {
			break
		}
		off += n - overlap
	}
	return "", "", false, nil
}

// isRodata reports whether sec is read-only data that string literals
// live in (.rodata, and .rodata.* in objects not merged by the linker).
func isRodata(sec *elf.Section) bool {
	if sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_ALLOC == 0 || sec.Flags&(elf.SHF_WRITE|elf.SHF_EXECINSTR) != 0 {
		return false
	}
	return sec.Name == ".rodata" || strings.HasPrefix(sec.Name, ".rodata.")
}

// markerVersion looks at every occurrence of marker in data, takes the
// text from it to the next NUL or newline, and returns what parse makes of
// the first one it accepts: a format string ("... version %s") or a
// help text mentioning the marker is skipped.
func markerVersion(data []byte, marker string, parse versionParser) (string, string, bool) {
	return markerVersionBefore(data, len(data), marker, parse)
}

// markerVersionBefore is markerVersion for the markers that start before
// offset limit of data.
func markerVersionBefore(data []byte, limit int, marker string, parse versionParser) (string, string, bool) {
	if marker == "" {
		return "", "", false
	}
	m := []byte(marker)
	for start := 0; ; {
		i := bytes.Index(data[start:], m)
		if i < 0 || start+i >= limit {
			return "", "", false
		}
		line := data[start+i:]
		line = line[:min(len(line), maxMarkerLine)]
		if j := bytes.IndexAny(line, "\x00\n"); j >= 0 {
			line = line[:j]
		}
		if v, vendor, ok := parse(string(line)); ok {
			return v, vendor, true
		}
		start += i + len(m)
	}
}

// fromBuildInfo reads the Go build info of real: the main module's version
// when the binary is the component's own module (go install ...@v2.4.2),
// else a `-X <module>/....Version=<v>` flag in -ldflags (which -trimpath
// builds, Debian's among them, do not record).
func (l *staticLookup) fromBuildInfo(spec binarySpec, real string) (staticVersion, error) {
	f, err := l.raw.OpenRaw(real)
	if err != nil {
		return staticVersion{}, err
	}
	defer f.Close()
	bi, err := buildinfo.Read(f)
	if err != nil {
		return staticVersion{}, fmt.Errorf("reading build info of %s: %w", real, err)
	}
	var settings [][2]string
	for _, s := range bi.Settings {
		settings = append(settings, [2]string{s.Key, s.Value})
	}
	v, ok := buildInfoVersion(bi.Main.Path, bi.Main.Version, settings, spec.modules)
	if !ok {
		return staticVersion{}, fmt.Errorf("%s (main module %s %s): %w", real, bi.Main.Path, bi.Main.Version, errNoVersion)
	}
	return staticVersion{Version: v, From: fromBuildInfo}, nil
}

// leadingVersion takes the dotted numbers a Go module version or a -X
// value starts with, as the --version parsers do ("v2.4.2" and
// "v1.7.23-k3s2" give 2.4.2 and 1.7.23).
var leadingVersion = lazyre.New(`^v?(\d+\.\d+(?:\.\d+)?)`)

// buildInfoVersion picks the version out of a Go binary's build info (main
// module path and version, build settings as key/value pairs) for a
// component built from one of modules. "(devel)" and pseudo-versions
// (v0.0.0-<date>-<commit>) say nothing about the release.
func buildInfoVersion(mainPath, mainVersion string, settings [][2]string, modules []string) (string, bool) {
	if slices.Contains(modules, mainPath) && !strings.HasPrefix(mainVersion, "v0.0.0-") {
		if m := leadingVersion.FindStringSubmatch(mainVersion); m != nil {
			return m[1], true
		}
	}
	for _, s := range settings {
		if s[0] != "-ldflags" {
			continue
		}
		if v, ok := ldflagsVersion(s[1], modules); ok {
			return v, true
		}
	}
	return "", false
}

// ldflagsVersion finds `-X <pkg>.Version=<v>` (or `.version`) in a
// -ldflags value, where pkg is inside one of modules.
func ldflagsVersion(ldflags string, modules []string) (string, bool) {
	fields := strings.Fields(ldflags)
	for i := 0; i < len(fields); i++ {
		var def string
		switch {
		case fields[i] == "-X" && i+1 < len(fields):
			i++
			def = fields[i]
		case strings.HasPrefix(fields[i], "-X="):
			def = strings.TrimPrefix(fields[i], "-X=")
		default:
			continue
		}
		def = strings.Trim(def, `'"`)
		name, value, ok := strings.Cut(def, "=")
		if !ok {
			continue
		}
		dot := strings.LastIndexByte(name, '.')
		if dot < 0 || !strings.EqualFold(name[dot+1:], "version") {
			continue
		}
		pkg := name[:dot]
		inModule := slices.ContainsFunc(modules, func(m string) bool {
			return pkg == m || strings.HasPrefix(pkg, m+"/")
		})
		if !inModule {
			continue
		}
		if m := leadingVersion.FindStringSubmatch(value); m != nil {
			return m[1], true
		}
	}
	return "", false
}

// dpkgPackage is one installed package as the status file lists it.
type dpkgPackage struct {
	Name    string
	Arch    string
	Version string
}

// fromPackage answers with the version of the first of spec.packages that
// installed the file at p (or real, or its unmerged-/usr alias) and whose
// file has not changed since (ctime no later than the .list file's mtime,
// which dpkg writes after unpacking): a binary replaced by hand is not the
// package's.
func (l *staticLookup) fromPackage(spec binarySpec, p, real string) (staticVersion, error) {
	l.dpkgOnce.Do(func() { l.dpkg, l.dpkgErr = l.readDpkgStatus() })
	if l.dpkgErr != nil {
		return staticVersion{}, l.dpkgErr
	}
	var installed []dpkgPackage
	for _, name := range spec.packages {
		installed = append(installed, l.dpkg[name]...)
	}
	if len(installed) == 0 {
		return staticVersion{}, fmt.Errorf("none of the packages %s is installed: %w", strings.Join(spec.packages, ", "), errNoVersion)
	}
	f, err := l.raw.OpenRaw(real)
	if err != nil {
		return staticVersion{}, err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return staticVersion{}, fmt.Errorf("stat %s: %w", real, err)
	}
	ctime, ok := changeTime(fi)
	if !ok {
		return staticVersion{}, fmt.Errorf("%s: no change time on this system: %w", real, errNoVersion)
	}
	paths := l.listPaths(p, real)
	for _, pkg := range installed {
		listFile, listed, err := l.packageLists(pkg, paths)
		if err != nil {
			return staticVersion{}, err
		}
		if !listed {
			continue
		}
		if ctime.After(listFile.ModTime()) {
			return staticVersion{}, fmt.Errorf("/%s changed at %s, after package %s installed it (%s): %w",
				real, ctime.UTC().Format("2006-01-02T15:04:05.000000"), pkg.Name, listFile.ModTime().UTC().Format("2006-01-02T15:04:05.000000"), errNoVersion)
		}
		v, ok := upstreamVersion(pkg.Version)
		if !ok {
			return staticVersion{}, fmt.Errorf("package %s version %q: expected <upstream>[-<revision>] with a dotted-number upstream: %w", pkg.Name, pkg.Version, errNoVersion)
		}
		return staticVersion{Version: v, Vendor: l.distributor() + " " + pkg.Version, From: fromPackage + pkg.Name}, nil
	}
	return staticVersion{}, fmt.Errorf("/%s is in none of the installed packages %s: %w", real, strings.Join(spec.packages, ", "), errNoVersion)
}

// readDpkgStatus scans the status file for the candidate packages.
func (l *staticLookup) readDpkgStatus() (map[string][]dpkgPackage, error) {
	const status = dpkgDir + "/status"
	f, err := l.raw.OpenRaw(status)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A file too large is refused before any of it is parsed, as when it
	// was read whole.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", status, err)
	}
	if fi.Size() > maxDpkgStatus {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", status, maxDpkgStatus)
	}
	pkgs, err := scanDpkgStatusBuffer(f, l.packages, dpkgReadSize)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", status, err)
	}
	return pkgs, nil
}

// listPaths are the spellings under which a package's .list file may name
// the binary: the path as found, its resolved path, and the unmerged-/usr
// path ("/bin/x" for usr/bin/x) when that resolves to the same file, as
// packages built before the /usr merge list it there.
func (l *staticLookup) listPaths(p, real string) []string {
	out := []string{"/" + p}
	add := func(q string) {
		if !slices.Contains(out, "/"+q) {
			out = append(out, "/"+q)
		}
	}
	add(real)
	for _, q := range []string{p, real} {
		if alias, ok := strings.CutPrefix(q, "usr/"); ok {
			if r, ok := resolveInRoot(l.s.root.FS(), alias); ok && r == real {
				add(alias)
			}
		}
	}
	return out
}

// packageLists opens the .list file of pkg (named <pkg>.list, or
// <pkg>:<arch>.list for multi-arch packages) and reports whether it lists
// one of paths.
func (l *staticLookup) packageLists(pkg dpkgPackage, paths []string) (os.FileInfo, bool, error) {
	names := []string{pkg.Name + ".list"}
	if pkg.Arch != "" {
		names = append(names, pkg.Name+":"+pkg.Arch+".list")
	}
	for _, n := range names {
		p := path.Join(dpkgDir, "info", n)
		f, err := l.raw.OpenRaw(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, false, fmt.Errorf("stat %s: %w", p, err)
		}
		listed, err := listContains(f, paths)
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("reading %s: %w", p, err)
		}
		return fi, listed, nil
	}
	return nil, false, nil
}

// distributor names the distribution in a package version's vendor
// ("Debian 1.6.20~ds1-1+deb12u3"): the first word of os-release's NAME,
// or "Debian" (dpkg's) when there is none.
func (l *staticLookup) distributor() string {
	kv, _ := l.s.osRelease()
	if w := strings.Fields(kv["NAME"]); len(w) > 0 {
		return w[0]
	}
	return "Debian"
}

// maxDpkgStatus bounds the status file: a server with every package of a
// large distribution installed has one of ~10 MB.
const maxDpkgStatus = 64 << 20

// dpkgReadSize is the first size of the window the status file is read
// through. Reading the 0.7-3 MB file whole into a fresh buffer cost three
// times the CPU of reading it through a window reused (the fresh pages'
// faults and zeroing); the window holds a read and the stanza being
// looked at, and grows only for a stanza larger than itself (or text
// without a Package field, which is kept until one comes). 64 KiB rather
// than 128: half the fresh pages, for five more reads of a 0.7 MB file.
const dpkgReadSize = 64 << 10

// scanDpkgStatus reads a dpkg status file and returns the installed
// packages among wanted, keyed by name (several architectures may be
// installed). A stanza counts as installed when its Status ends in "ok
// installed", whatever the selection: a package on hold is installed.
func scanDpkgStatus(r io.Reader, wanted map[string]bool) (map[string][]dpkgPackage, error) {
	return scanDpkgStatusBuffer(r, wanted, dpkgReadSize)
}

// scanDpkgStatusBuffer is scanDpkgStatus reading through a window of
// size bytes at first. It looks for the Package fields alone (one
// vectorised search for "Package:", whose capital P is rare, over the
// file) and parses the stanzas of wanted packages line by line: a real
// node's file holds ~1,500 stanzas (2-3 MB) of which berth wants a
// handful, and scanning every line cost ~3 ms there. A Package field that
// does not follow a blank line is checked to start its own stanza, so
// that a file without blank lines between stanzas, which dpkg never
// writes, is still refused as not a status file. Offsets are of the file;
// the window keeps what the checks may still look at, from the byte
// before the previous Package field on.
func scanDpkgStatusBuffer(r io.Reader, wanted map[string]bool, size int) (map[string][]dpkgPackage, error) {
	const field = "Package:"
	w := &statusWindow{r: r, buf: make([]byte, 0, max(size, 2*len(field)))}
	out := map[string][]dpkgPackage{}
	prev, prevName := -1, "" // the previous Package field
	for off := 0; ; {
		keep := max(prev-1, 0)
		at, err := w.lineStarting(off, field, keep)
		if err != nil {
			return nil, err
		}
		if at < 0 {
			return out, nil
		}
		nameEnd, err := w.index(at+len(field), "\n", keep)
		if err != nil {
			return nil, err
		}
		if nameEnd < 0 {
			nameEnd = w.end()
		}
		name := string(bytes.TrimSpace(w.slice(at+len(field), nameEnd)))
		// The stanza starts after the last blank line before the field:
		// right before it in every file dpkg writes.
		start := at
		if at >= 2 && w.at(at-2) != '\n' {
			// Only a blank line after the previous field's first byte
			// can keep the two fields apart.
			i := bytes.LastIndex(w.slice(keep, at), []byte("\n\n"))
			if prev >= 0 && (i < 0 || keep+i+2 <= prev) {
				return nil, fmt.Errorf("line %d: Package field in the middle of stanza %q (expected a blank line between stanzas)", w.lineAt(at), prevName)
			}
			start = 0
			if i >= 0 {
				start = keep + i + 2
			}
		}
		prev, prevName = at, name
		off = at + len(field)
		if !wanted[name] {
			continue
		}
		// Kept: the stanza, and the byte before this field, to which the
		// next field's checks look back.
		end, err := w.index(at, "\n\n", min(start, max(at-1, 0)))
		if err != nil {
			return nil, err
		}
		if end < 0 {
			end = w.end()
		} else {
			end++
		}
		p, installed, bad, err := parseStanza(w.slice(start, end))
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", w.lineAt(start+bad), err)
		}
		if installed && p.Name != "" && p.Version != "" {
			out[p.Name] = append(out[p.Name], p)
		}
	}
}

// statusWindow is the part of a file read so far that is still needed:
// its bytes from offset base on. Offsets given to its methods are of the
// file, at or after the keep offset of the last fill.
type statusWindow struct {
	r     io.Reader
	buf   []byte
	base  int  // file offset of buf[0]
	lines int  // newlines before base, for error messages
	total int  // bytes read
	eof   bool // r is exhausted: buf ends where the file does
}

func (w *statusWindow) at(off int) byte           { return w.buf[off-w.base] }
func (w *statusWindow) slice(from, to int) []byte { return w.buf[from-w.base : to-w.base] }
func (w *statusWindow) end() int                  { return w.base + len(w.buf) }
func (w *statusWindow) lineAt(off int) int {
	return w.lines + bytes.Count(w.buf[:off-w.base], []byte("\n")) + 1
}

// fill reads more of the file, first dropping the bytes before keep. It
// returns false, with a nil error, at the end of the file.
func (w *statusWindow) fill(keep int) (bool, error) {
	if w.eof {
		return false, nil
	}
	if drop := keep - w.base; drop > 0 {
		w.lines += bytes.Count(w.buf[:drop], []byte("\n"))
		w.buf = w.buf[:copy(w.buf, w.buf[drop:])]
		w.base = keep
	}
	if len(w.buf) == cap(w.buf) {
		w.buf = slices.Grow(w.buf, cap(w.buf))
	}
	var n int
	var err error
	for range 100 {
		if n, err = w.r.Read(w.buf[len(w.buf):cap(w.buf)]); n > 0 || err != nil {
			break
		}
	}
	if n == 0 && err == nil {
		return false, io.ErrNoProgress
	}
	w.buf = w.buf[:len(w.buf)+n]
	w.total += n
	if w.total > maxDpkgStatus {
		return false, fmt.Errorf("larger than %d bytes", maxDpkgStatus)
	}
	switch {
	case errors.Is(err, io.EOF):
		w.eof = true
	case err != nil:
		return false, err
	}
	return true, nil
}

// index returns the offset of the first sep at or after from, reading as
// far as needed, or -1 when the file has none.
func (w *statusWindow) index(from int, sep string, keep int) (int, error) {
	for searched := from; ; {
		if i := bytes.Index(w.buf[searched-w.base:], []byte(sep)); i >= 0 {
			return searched + i, nil
		}
		// A sep cut by the end of what was read starts in its last
		// len(sep)-1 bytes.
		searched = max(searched, w.end()-len(sep)+1)
		more, err := w.fill(keep)
		if !more || err != nil {
			return -1, err
		}
	}
}

// lineStarting returns the offset of the first line at or after from
// that starts with prefix, or -1.
func (w *statusWindow) lineStarting(from int, prefix string, keep int) (int, error) {
	for {
		at, err := w.index(from, prefix, keep)
		if at < 0 || err != nil {
			return at, err
		}
		if at == 0 || w.at(at-1) == '\n' {
			return at, nil
		}
		from = at + 1
	}
}

// parseStanza reads the fields berth needs from one stanza; other fields
// are skipped without being kept. at is the offset of a malformed line.
func parseStanza(stanza []byte) (p dpkgPackage, installed bool, at int, err error) {
	for off := 0; off < len(stanza); {
		b := stanza[off:]
		next := len(stanza)
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b, next = b[:i], off+i+1
		}
		if len(b) == 0 || b[0] == ' ' || b[0] == '\t' {
			off = next
			continue // continuation of a multi-line field
		}
		key, value, ok := bytes.Cut(b, []byte(":"))
		if !ok {
			return p, false, off, fmt.Errorf("expected Field: value, got %q", truncate(string(b), 60))
		}
		switch string(key) {
		case "Package":
			p.Name = string(bytes.TrimSpace(value))
		case "Status":
			installed = strings.HasSuffix(string(bytes.TrimSpace(value)), " ok installed")
		case "Version":
			p.Version = string(bytes.TrimSpace(value))
		case "Architecture":
			p.Arch = string(bytes.TrimSpace(value))
		}
		off = next
	}
	return p, installed, 0, nil
}

// truncate shortens s for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// listContains reports whether the dpkg .list file r (one absolute path a
// line) has one of paths as a line.
func listContains(r io.Reader, paths []string) (bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4<<10), 64<<10)
	for sc.Scan() {
		if slices.Contains(paths, sc.Text()) {
			return true, nil
		}
	}
	return false, sc.Err()
}

// upstreamVersion turns a Debian package version into the upstream
// release the binary reports: it drops the epoch ("1:"), the Debian
// revision (after the last "-"), and the repack and pre-release suffixes
// ("~ds1", "+dfsg", "~rc1"), so "1:7.2+dfsg-7+deb12u18+b3" gives "7.2"
// and "1.6.20~ds1-1+deb12u3" gives "1.6.20". ok is false unless the rest
// is dotted numbers, the shape the --version parsers give.
func upstreamVersion(v string) (string, bool) {
	if _, after, ok := strings.Cut(v, ":"); ok {
		v = after
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		v = v[:i]
	}
	// "2.0+really1.9" is how Debian goes back to an older release.
	if _, after, ok := strings.Cut(v, "+really"); ok {
		v = after
	}
	if i := strings.IndexAny(v, "~+"); i >= 0 {
		v = v[:i]
	}
	if !versionShape.MatchString(v) {
		return "", false
	}
	return v, true
}

// versionShape is what a version looks like once parsed.
var versionShape = lazyre.New(`^\d+\.\d+(\.\d+)?$`)
