//go:build linux

package configure_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// corpusConfig is one starting point of a node: a main config written by
// a real program (nil data: no config file at all, containerd's built-in
// defaults).
type corpusConfig struct {
	name string
	data []byte
}

// cellResult is one line of the matrix TestCorpus prints.
type cellResult struct {
	config, version, outcome, reason string
}

// Outcomes of a cell. The refusals are passes: containerd or berth said no
// to a file it cannot handle, as documented, and changed nothing.
const (
	outcomePass              = "pass"
	outcomeContainerdRefuses = "containerd refuses the file (expected)"
	outcomeBerthRefuses      = "berth refuses (expected)"
	outcomeFail              = "FAIL"
)

// TestCorpus proves, with real containerd binaries of every version in
// BERTH_CONTAINERDS and the real configs of testdata/upstream/runtime-configs
// (plus no config file at all), that `berth config apply` keeps every
// handler the node had live, adds its own, changes nothing when run again,
// and that `berth config remove` gives back the node byte for byte.
func TestCorpus(t *testing.T) {
	ctrs := critest.Containerds(t)
	configs := []corpusConfig{{name: "no-config-file"}}
	// Ours are real program output too (testdata/corpus/README.md).
	ours, err := filepath.Glob("testdata/corpus/*.toml")
	if err != nil || len(ours) == 0 {
		t.Fatalf("testdata/corpus: %v, %d files", err, len(ours))
	}
	for _, p := range append(upstreamtest.Glob(t, "runtime-configs/*.toml"), ours...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, corpusConfig{name: strings.TrimSuffix(filepath.Base(p), ".toml"), data: data})
	}
	// Applied side by side on every node: each hypervisor, each TEE, the
	// GPU variant, and the three default snapshotters (overlayfs, nydus,
	// devmapper), so that handlers of every shape meet every config.
	var plats []platform.Platform
	for _, s := range []string{
		"kubeadm-qemu-none",
		"kubeadm-qemu-snp",
		"kubeadm-qemu-tdx",
		"kubeadm-cloud-hypervisor-none",
		"kubeadm-firecracker-none",
		"kubeadm-qemu-snp+gpu",
	} {
		p, err := platform.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		plats = append(plats, p)
	}

	// Each cell starts containerd three or four times (0.2-2 s each) and
	// mostly waits; more than a few at once only makes them contend for
	// the two cores of the build machine, whatever -parallel says.
	sem := make(chan struct{}, 2*runtime.GOMAXPROCS(0))
	var mu sync.Mutex
	var results []cellResult
	t.Cleanup(func() { logMatrix(t, configs, ctrs, results) }) // after every subtest
	for _, cfg := range configs {
		for _, ctr := range ctrs {
			t.Run(cfg.name+"/"+ctr.Version, func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				r := cellResult{config: cfg.name, version: ctr.Version}
				r.outcome, r.reason = runCell(t, cfg, ctr, plats)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				t.Logf("result | %s | %s | %s | %s", r.config, r.version, r.outcome, r.reason)
			})
		}
	}
}

// logMatrix prints the results as a table, one row per config and one
// column per containerd version, then the reason of every cell that is not
// a plain pass ("-": the cell stopped before it had a result).
func logMatrix(t *testing.T, configs []corpusConfig, ctrs []critest.Containerd, results []cellResult) {
	short := map[string]string{outcomePass: "pass", outcomeContainerdRefuses: "refused by containerd",
		outcomeBerthRefuses: "refused by berth", outcomeFail: "FAIL"}
	byCell := map[[2]string]cellResult{}
	for _, r := range results {
		byCell[[2]string{r.config, r.version}] = r
	}
	var b strings.Builder
	b.WriteString("corpus results:\n| config |")
	for _, c := range ctrs {
		b.WriteString(" " + c.Version + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(ctrs)) + "\n")
	var notes []string
	for _, cfg := range configs {
		b.WriteString("| " + cfg.name + " |")
		for _, c := range ctrs {
			r, ok := byCell[[2]string{cfg.name, c.Version}]
			if !ok {
				b.WriteString(" - |")
				continue
			}
			b.WriteString(" " + short[r.outcome] + " |")
			if r.outcome != outcomePass {
				notes = append(notes, fmt.Sprintf("%s / %s: %s: %s", cfg.name, c.Version, r.outcome, r.reason))
			}
		}
		b.WriteString("\n")
	}
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
	t.Log(b.String())
}

// maxConfigVersion is the newest config version a containerd loads, per
// the table "Which containerd accepts which file" of the corpus README:
// 1.7 refuses version 3 and 4 files, 2.0-2.2 refuse version 4. Debian's
// 1.6 refuses none: it loads any version and silently ignores a file
// above 2 (0 here means no limit).
func maxConfigVersion(c critest.Containerd) int {
	switch {
	case c.Major() == 1 && c.Minor() <= 6:
		return 0
	case c.Major() == 1:
		return 2
	case c.Major() == 2 && c.Minor() <= 2:
		return 3
	}
	return 4
}

// runCell runs one config on one containerd and returns the outcome and,
// for anything but a plain pass, why. Every problem is also reported with
// t.Error, so that a failing cell shows all that went wrong, not the first.
func runCell(t *testing.T, cfg corpusConfig, ctr critest.Containerd, plats []platform.Platform) (outcome, reason string) {
	var problems []string
	var refusal string // berth's refusal, when it is the expected outcome
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		t.Error(msg)
		problems = append(problems, firstLine(msg))
	}
	failed := func() (string, string) { return outcomeFail, strings.Join(problems, "; ") }

	root := t.TempDir()
	mainRel := platform.Layouts()["kubeadm"].Config
	fileVersion := 0 // no file
	if cfg.data != nil {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(mainRel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, mainRel), cfg.data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := runtimecfg.ParseContainerd(mainRel, cfg.data)
		if err != nil {
			t.Fatalf("berth cannot parse the corpus file %s: %v", cfg.name, err)
		}
		fileVersion = c.Version
	}
	before := readTree(t, root)
	d := critest.NewDirs(t)

	// 1. The node as it is: which handlers are live.
	dm, err := critest.StartOnRoot(t, ctr.Bin, root, d)
	if limit := maxConfigVersion(ctr); limit != 0 && fileVersion > limit {
		if err == nil {
			fail("containerd %s started on a version %d config although it only loads up to version %d (corpus README): handlers %v",
				ctr.Version, fileVersion, limit, dm.Status.Names())
			return failed()
		}
		return outcomeContainerdRefuses, fmt.Sprintf("version %d file, containerd %s loads up to %d: %s",
			fileVersion, ctr.Version, limit, lastLogLine(err.Error()))
	}
	if err != nil {
		fail("containerd %s does not start on the untouched node: %v", ctr.Version, err)
		return failed()
	}
	h0 := dm.Status
	dm.Stop()
	if _, ok := h0.Handlers["runc"]; !ok {
		fail("the untouched node has no runc handler: %v", h0.Names())
	}
	if sum, det := diffTrees(before, readTree(t, root)); sum != "" {
		fail("containerd itself changed the root: %s\n%s", sum, det)
	}

	// 2. berth config apply of every platform, each twice, as the CLI runs it.
	fsys, err := hostfs.OpenWritable(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	// Debian's 1.6 loads a version 3/4 file but ignores it and runs on its
	// defaults: berth must say no rather than write handlers that
	// containerd would not read.
	wantRefusal := maxConfigVersion(ctr) == 0 && fileVersion > 2
	var applied []platform.Platform
	for _, p := range plats {
		r, err := corpusRender(t, root, p, ctr)
		if err == nil {
			_, err = configure.Apply(fsys, r)
		}
		if wantRefusal {
			if err == nil {
				fail("apply %s on containerd %s with a version %d file succeeded; want a refusal (containerd %s ignores that file)",
					p, ctr.Version, fileVersion, ctr.Version)
				applied = append(applied, p)
			} else if !strings.Contains(err.Error(), "version") {
				fail("apply %s refused, but without naming the version mismatch: %v", p, err)
			} else {
				refusal = firstLine(err.Error())
			}
			continue
		}
		if err != nil {
			fail("apply %s: %v", p, err)
			continue
		}
		applied = append(applied, p)
		once := readTree(t, root)
		// The second run is a new `berth config apply`: it discovers the
		// node again, berth's own first change included.
		r2, err := corpusRender(t, root, p, ctr)
		if err != nil {
			fail("second render %s: %v", p, err)
			continue
		}
		res, err := configure.Apply(fsys, r2)
		if err != nil {
			fail("second apply %s: %v", p, err)
		} else if len(res.Changed) != 0 {
			fail("second apply %s changed %v", p, res.Changed)
		}
		if sum, det := diffTrees(once, readTree(t, root)); sum != "" {
			fail("second apply %s changed the tree: %s\n%s", p, sum, det)
		}
	}
	if wantRefusal {
		if sum, det := diffTrees(before, readTree(t, root)); sum != "" {
			fail("a refused apply changed the root: %s\n%s", sum, det)
		}
		if len(problems) == 0 {
			return outcomeBerthRefuses, refusal
		}
		return failed()
	}

	// 3. The node after apply: berth's handlers and all the node's own.
	if len(applied) > 0 {
		dm, err = critest.StartOnRoot(t, ctr.Bin, root, d)
		if err != nil {
			fail("containerd %s does not start after apply: %v", ctr.Version, err)
		} else {
			h1 := dm.Status
			dm.Stop()
			for _, name := range h0.Names() {
				if _, ok := h1.Handlers[name]; !ok {
					fail("after apply the node's handler %s is gone: had %v, has %v", name, h0.Names(), h1.Names())
				} else if !sameHandler(h0.Handlers[name], h1.Handlers[name]) {
					fail("after apply the node's handler %s changed: %+v -> %+v", name, h0.Handlers[name], h1.Handlers[name])
				}
			}
			for _, p := range applied {
				for _, msg := range handlerProblems(h1, p, ctr) {
					fail("after apply: %s", msg)
				}
			}
		}
	}

	// 4. berth config remove of every platform: the node as it was.
	for _, p := range applied {
		if _, err := configure.Remove(fsys, p.Handler()); err != nil {
			fail("remove %s: %v", p, err)
		}
	}
	if sum, det := diffTrees(before, readTree(t, root)); sum != "" {
		fail("after remove the root is not what it was: %s\n%s", sum, det)
	}
	dm, err = critest.StartOnRoot(t, ctr.Bin, root, d)
	if err != nil {
		fail("containerd %s does not start after remove: %v", ctr.Version, err)
	} else {
		h2 := dm.Status
		dm.Stop()
		if !slices.Equal(h0.Names(), h2.Names()) {
			fail("after remove the handlers are %v, before apply they were %v", h2.Names(), h0.Names())
		}
		for name, h := range h0.Handlers {
			if h2h, ok := h2.Handlers[name]; ok && !sameHandler(h, h2h) {
				fail("after remove the node's handler %s is not what it was: %+v -> %+v", name, h, h2h)
			}
		}
	}
	if len(problems) > 0 {
		return failed()
	}
	return outcomePass, fmt.Sprintf("live before %v, %d added", h0.Names(), len(applied))
}

// corpusRender renders p the way `berth config apply` does on this node
// (configPlan in internal/cli): discovery of the root as it is now (each
// apply is a new run that sees berth's own earlier changes), the node's
// containerd version, then configure.TargetFor and configure.Render. The
// root holds no containerd binary, so the version discovery would read
// from it is filled in from BERTH_CONTAINERDS.
func corpusRender(t *testing.T, root string, p platform.Platform, ctr critest.Containerd) (*configure.Rendered, error) {
	t.Helper()
	hr, err := hostfs.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	f := discover.Run(context.Background(), hr, discover.Options{})
	l, ok := p.Distribution().Layout()
	if !ok {
		t.Fatalf("%s: no layout", p)
	}
	if f.Runtimes.Containerd == nil { // no binary, no config: the no-config node
		f.Runtimes.Containerd = &facts.ContainerRuntime{Layout: p.Distribution().String(), ConfigPath: l.Config, Socket: l.Socket}
	}
	f.Runtimes.Containerd.Version = ctr.Version
	target, err := configure.TargetFor(f, p, 0)
	if err != nil {
		return nil, err
	}
	return configure.Render(p, target, configure.Options{})
}

// sameHandler reports whether a and b configure the same runtime. Options
// are compared without their zero values: containerd hands them to the
// shim as a proto3 message (runc's runcoptions.Options), where a field at
// its zero value and an absent field are the same thing, and containerd
// 1.x reports its built-in runc with every option spelled out at zero but a
// runc named in a file with only the options written there.
func sameHandler(a, b cri.Handler) bool {
	a.Options, b.Options = nonZero(a.Options), nonZero(b.Options)
	return reflect.DeepEqual(a, b)
}

func nonZero(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if v != nil && !reflect.ValueOf(v).IsZero() {
			out[k] = v
		}
	}
	return out
}

// handlerProblems checks p's handler as containerd reports it.
func handlerProblems(st *cri.Status, p platform.Platform, ctr critest.Containerd) []string {
	h, ok := st.Handlers[p.Handler()]
	if !ok {
		return []string{fmt.Sprintf("handler %s is not live; containerd %s has %v", p.Handler(), ctr.Version, st.Names())}
	}
	var out []string
	ps := configure.Paths{Prefix: configure.DefaultPrefix}
	if h.RuntimeType != "io.containerd.kata.v2" || h.RuntimePath != ps.Shim(p) {
		out = append(out, fmt.Sprintf("%s: runtime type %q path %q, want io.containerd.kata.v2 %s", p.Handler(), h.RuntimeType, h.RuntimePath, ps.Shim(p)))
	}
	if got := h.Options["ConfigPath"]; got != ps.KataConfig(p) {
		out = append(out, fmt.Sprintf("%s: options.ConfigPath = %v, want %s", p.Handler(), got, ps.KataConfig(p)))
	}
	if !h.PrivilegedWithoutHostDevices || !slices.Equal(h.PodAnnotations, []string{"io.katacontainers.*"}) {
		out = append(out, fmt.Sprintf("%s: privileged_without_host_devices %v, pod annotations %v", p.Handler(), h.PrivilegedWithoutHostDevices, h.PodAnnotations))
	}
	// containerd 1.6 has no per-handler snapshotter (1.7 added it).
	if (ctr.Major() > 1 || ctr.Minor() >= 7) && h.Snapshotter != configure.HandlerSnapshotter(p) {
		out = append(out, fmt.Sprintf("%s: snapshotter %q, want %q", p.Handler(), h.Snapshotter, configure.HandlerSnapshotter(p)))
	}
	return out
}

// tree is a root as berth must leave it: every regular file's mode and
// bytes, every directory, every symlink's target.
type tree struct {
	files map[string]string // path -> mode + "\n" + content
	dirs  map[string]bool
	links map[string]string
}

func readTree(t *testing.T, root string) tree {
	t.Helper()
	tr := tree{files: map[string]string{}, dirs: map[string]bool{}, links: map[string]string{}}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case e.IsDir():
			tr.dirs[rel] = true
		case e.Type()&fs.ModeSymlink != 0:
			tr.links[rel], err = os.Readlink(p)
		case e.Type().IsRegular():
			var fi fs.FileInfo
			var b []byte
			if fi, err = e.Info(); err == nil {
				b, err = os.ReadFile(p)
				tr.files[rel] = fi.Mode().String() + "\n" + string(b)
			}
		default:
			tr.files[rel] = "special file " + e.Type().String()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// diffTrees says how b differs from a: a one-line summary and the details
// (the lines of each changed file that are only before or only after);
// both are "" when nothing differs.
func diffTrees(a, b tree) (summary, detail string) {
	var sum, det []string
	for _, k := range slices.Sorted(maps.Keys(b.files)) {
		if old, ok := a.files[k]; !ok {
			sum = append(sum, "file "+k+" added")
			det = append(det, "file "+k+" added:\n"+b.files[k])
		} else if old != b.files[k] {
			sum = append(sum, "file "+k+" changed")
			det = append(det, fmt.Sprintf("file %s changed:\n%s", k, lineDiff(old, b.files[k])))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.files)) {
		if _, ok := b.files[k]; !ok {
			sum = append(sum, "file "+k+" removed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b.dirs)) {
		if !a.dirs[k] {
			sum = append(sum, "directory "+k+" added")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.dirs)) {
		if !b.dirs[k] {
			sum = append(sum, "directory "+k+" removed")
		}
	}
	if !maps.Equal(a.links, b.links) {
		sum = append(sum, fmt.Sprintf("symlinks %v became %v", a.links, b.links))
	}
	return strings.Join(sum, ", "), strings.Join(det, "\n")
}

// lineDiff lists the lines only in a ("-") and only in b ("+"), in order:
// enough to see what a config edit did without a diff library.
func lineDiff(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for l := range strings.Lines(s) {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out strings.Builder
	for l := range strings.Lines(a) {
		if cb[l] > 0 {
			cb[l]--
			continue
		}
		out.WriteString("- " + strings.TrimSuffix(l, "\n") + "\n")
	}
	for l := range strings.Lines(b) {
		if ca[l] > 0 {
			ca[l]--
			continue
		}
		out.WriteString("+ " + strings.TrimSuffix(l, "\n") + "\n")
	}
	return out.String()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// lastLogLine is the last non-empty line of an error carrying containerd's
// log: the reason it gave up.
func lastLogLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
