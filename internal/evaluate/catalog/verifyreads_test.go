package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testhosts"
	"berth.dev/berth/platform"
)

// TestReadsAreVerified finds out which facts each check actually reads,
// instead of trusting what it declares, and holds the declarations and the
// evaluator to it.
//
// On every fixture host (and the ready hosts of the other tests, one of
// them with host plug-ins), every value of the Facts document is perturbed
// in turn: a scalar is zeroed or given the values the same fact has on the
// other hosts (and a few more), a pointer, map entry or list element is
// dropped or taken from another host, a list loses an element or gains the
// other hosts' ones. A check reads a fact when such a perturbation changes
// its status; the union over hosts, perturbations and the platforms the
// check applies to is its verified read set. Only the status counts:
// messages also name values the verdict does not rest on (runtime.present
// names the containerd version that runtime.version judges).
//
// Then, for every check:
//   - it reads something: a check that reads nothing judges nothing;
//   - each verified read, made unknown the way discovery records an
//     unreadable fact (the value zeroed or absent, an entry in Facts.Unknown),
//     gives unknown or skip, never pass, warn or fail, on every host and
//     platform;
//   - Reads and ReadsFor declare every verified read (the declared path is
//     the fact, a parent or a child of it: the evaluator treats all three as
//     unknown together), and declare nothing that is never read.
func TestReadsAreVerified(t *testing.T) {
	hosts := verifyHosts(t)
	ps := platform.All()
	donors := make([]reflect.Value, len(hosts))
	for i, h := range hosts {
		donors[i] = reflect.ValueOf(h.f).Elem()
	}
	v := newVerifier()
	for i, h := range hosts {
		var w walker
		root := reflect.ValueOf(h.f).Elem()
		others := slices.Delete(slices.Clone(donors), i, i+1)
		w.walk("", slot{
			get: func() reflect.Value { return root },
			set: func(nv reflect.Value) { root.Set(nv) },
		}, root.Type(), others, true)
		v.host(t, h.name, h.f, w.out, ps)
	}
	v.report(t, ps)
}

// verifyHost is one Facts document the reads are verified on.
type verifyHost struct {
	name string
	f    *facts.Facts
}

// verifyHosts discovers every fixture host, as berth facts --root does, and
// adds hand-made hosts for what no fixture has: a ready SNP host, a ready
// TDX host with CRI-O handlers, and one with host plug-ins and network
// probes.
func verifyHosts(t *testing.T) []verifyHost {
	t.Helper()
	var out []verifyHost
	for _, h := range testhosts.Names(t) {
		root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", h))
		if err != nil {
			t.Fatalf("opening fixture host %s: %v", h, err)
		}
		out = append(out, verifyHost{h, discover.Run(context.Background(), root, discover.Options{Now: func() time.Time { return time.Unix(0, 0) }})})
	}
	plugged := readyFacts()
	plugged.Plugins = facts.Plugins{
		Errors: []facts.PluginError{{Name: "site", Message: "bad line 3"}},
		Findings: []facts.PluginFinding{
			{Plugin: "attest", ID: "attest", Status: "fail", Message: "no PCCS"},
			{Plugin: "attest", ID: "tpm", Status: "pass"},
		},
	}
	// The live reachability probes (berth check --network), which no
	// fixture ran.
	plugged.Network.Reachability = facts.Reachability{Checked: true, TimeoutMS: 3000, Targets: []facts.Endpoint{
		{Role: "registry", URL: "https://registry.k8s.io", Reachable: true, HTTPStatus: 401},
		{Role: "attestation", URL: "https://kbs.example.com:8080", Reachable: false},
	}}
	// A peer-pods node: the cloud-api-adaptor's socket directory, which
	// no fixture has.
	plugged.Devices.Nodes["run/peerpod"] = facts.DeviceNode{Exists: true, Mode: "drwxr-xr-x"}
	// An AKS Kata node pool's Hyper-V root-partition device, which no
	// fixture has.
	plugged.Devices.Nodes["dev/mshv"] = facts.DeviceNode{Exists: true, Mode: "crw-------"}
	// CRI-O with Kata handlers, which no fixture has.
	crio := readyTDXFacts()
	crio.Runtimes.CRIO = &facts.ContainerRuntime{Binary: "/usr/bin/crio", Version: "1.33.2", Layout: "openshift",
		ConfigPath: "etc/crio/crio.conf", ConfigExists: true, Socket: "run/crio/crio.sock", SocketExists: true,
		Handlers: []facts.Handler{{Name: "kata-qemu", RuntimePath: "/opt/kata/bin/containerd-shim-kata-v2"}, {Name: "kata-qemu-tdx", RuntimePath: "/opt/kata/bin/containerd-shim-kata-v2"},
			// A GPU handler with the guest its configuration boots.
			{Name: "kata-qemu-nvidia-gpu", RuntimePath: "/opt/kata/bin/containerd-shim-kata-v2", ConfigPath: "/opt/kata/share/defaults/kata-containers/configuration-qemu-nvidia-gpu.toml",
				Kata: &facts.KataGuest{Hypervisor: "qemu", Kernel: "/opt/kata/share/kata-containers/vmlinuz-nvidia-gpu.container", Image: "/opt/kata/share/kata-containers/kata-containers-nvidia-gpu.img"}}}}
	return append(out, verifyHost{"(ready snp)", readyFacts()}, verifyHost{"(ready tdx, cri-o)", crio}, verifyHost{"(plug-ins, network)", plugged})
}

// slot reads and replaces one value of a Facts document. Every set copies
// the containers above the value (struct, map, list, pointer) rather than
// writing into them, so that values the document shares with another (a
// pointer, a map) are never changed, and restoring the old value restores
// the document exactly.
type slot struct {
	get func() reflect.Value
	set func(reflect.Value)
}

// mutation replaces the value at one fact path.
type mutation struct {
	path string
	at   slot
	// to is the new value; the zero Value deletes a map entry.
	to reflect.Value
	// unknown marks the mutation that leaves the fact as discovery leaves
	// one it could not read: zero, nil or absent.
	unknown bool
	// coarse marks a mutation of a whole section (see section), which
	// only screens the checks for the section's fine mutations.
	coarse bool
}

// section is the part of the document a fact belongs to: its first two
// segments ("kernel.config", "devices.nodes", "pci.driver"). Each check
// reads a few sections; the fine mutations of a section are evaluated
// only for the checks whose result a coarse mutation of the section (the
// whole section zeroed or taken from another host) changed.
func section(path string) string {
	i := strings.IndexByte(path, '.')
	if i < 0 {
		return path
	}
	if j := strings.IndexByte(path[i+1:], '.'); j >= 0 {
		return path[:i+1+j]
	}
	return path
}

// walker lists the mutations of one document.
type walker struct{ out []mutation }

func (w *walker) add(path string, at slot, to reflect.Value, unknown bool) {
	w.out = append(w.out, mutation{path: path, at: at, to: to, unknown: unknown})
}

// maxAlternatives bounds the values taken from other hosts for one fact,
// which keeps the test fast without losing any kind of value: hosts differ
// in a handful of ways per fact.
const maxAlternatives = 3

// walk lists the mutations of the value at s, of type t, whose values on
// the other hosts are donors. own is false when the caller already listed
// the mutation that makes this path unknown (a map entry or list element
// dropped), so that there is exactly one per path and value.
func (w *walker) walk(path string, s slot, t reflect.Type, donors []reflect.Value, own bool) {
	if t == reflect.TypeFor[time.Time]() {
		return
	}
	cur := s.get()
	if path != "" && path == section(path) {
		w.out = append(w.out, mutation{path: path, at: s, to: reflect.Zero(t), coarse: true})
		// Every other host's section: a section only some hosts have
		// (a TDX module, CRI-O) must not be missed.
		for _, d := range distinctN(donors, cur, len(donors)) {
			w.out = append(w.out, mutation{path: path, at: s, to: d, coarse: true})
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !sf.IsExported() || name == "" || name == "-" || (path == "" && name == "unknown") {
				continue
			}
			var ds []reflect.Value
			for _, d := range donors {
				ds = append(ds, d.Field(i))
			}
			w.walk(join(path, name), fieldSlot(s, t, i), sf.Type, ds, true)
		}
	case reflect.Pointer:
		w.add(path, s, reflect.Zero(t), own)
		var elems []reflect.Value
		for _, d := range donors {
			if !d.IsNil() {
				elems = append(elems, d.Elem())
			}
		}
		if cur.IsNil() {
			for _, d := range distinct(elems, reflect.Value{}) {
				w.add(path, s, pointerTo(d), false)
			}
			if t.Elem().Kind() != reflect.Struct {
				// A scalar: a value no host has may be the one that
				// matters (a parameter switched off everywhere).
				for _, a := range scalarAlternatives(reflect.Zero(t.Elem()), nil) {
					w.add(path, s, pointerTo(a), false)
				}
			}
			return
		}
		w.walk(path, elemSlot(s, t), t.Elem(), elems, false)
	case reflect.Map:
		w.add(path, s, reflect.Zero(t), own)
		keys := map[string]bool{}
		for _, k := range cur.MapKeys() {
			keys[k.String()] = true
		}
		for _, k := range sortedKeys(cur) {
			var ds []reflect.Value
			for _, d := range donors {
				if dv := d.MapIndex(k); dv.IsValid() {
					ds = append(ds, dv)
				}
			}
			es := entrySlot(s, t, k)
			p := join(path, k.String())
			w.add(p, es, reflect.Value{}, true)
			w.walk(p, es, t.Elem(), ds, false)
		}
		// Keys only other hosts have: a module loaded there, a config
		// option set there.
		added := map[string]int{}
		for _, d := range donors {
			for _, k := range sortedKeys(d) {
				if keys[k.String()] || added[k.String()] >= 1 {
					continue
				}
				added[k.String()]++
				w.add(join(path, k.String()), entrySlot(s, t, k), d.MapIndex(k), false)
			}
		}
	case reflect.Slice:
		w.walkSlice(path, s, t, donors, own)
	default:
		if own {
			w.add(path, s, reflect.Zero(t), true)
		}
		for _, a := range scalarAlternatives(cur, donors) {
			w.add(path, s, a, false)
		}
	}
}

// walkSlice lists the mutations of a list. Elements with a "name" are
// named in the path ("binaries.qemu.path"), as checks declare them; other
// lists are transparent ("gpus.vfioBound" is the field of every GPU).
func (w *walker) walkSlice(path string, s slot, t reflect.Type, donors []reflect.Value, own bool) {
	cur := s.get()
	w.add(path, s, reflect.Zero(t), own)
	et := t.Elem()
	nameField := -1
	if et.Kind() == reflect.Struct {
		for i := range et.NumField() {
			if n, _, _ := strings.Cut(et.Field(i).Tag.Get("json"), ","); n == "name" {
				nameField = i
			}
		}
	}
	var pool []reflect.Value // the elements of the other hosts
	for _, d := range donors {
		for j := range d.Len() {
			pool = append(pool, d.Index(j))
		}
	}
	if nameField >= 0 {
		have := map[string]bool{}
		for j := range cur.Len() {
			name := cur.Index(j).Field(nameField).String()
			have[name] = true
			p := join(path, name)
			w.add(p, s, without(cur, j), true)
			var ds []reflect.Value
			for _, d := range pool {
				if d.Field(nameField).String() == name {
					ds = append(ds, d)
				}
			}
			n := len(w.out)
			w.walk(p, indexSlot(s, t, j), et, ds, false)
			// Changing the name is dropping the element and adding
			// another, which the list's own mutations do.
			tail := slices.DeleteFunc(w.out[n:], func(m mutation) bool { return m.path == p+".name" })
			w.out = w.out[:n+len(tail)]
		}
		added := map[string]bool{}
		for _, d := range pool {
			name := d.Field(nameField).String()
			if have[name] || added[name] {
				continue
			}
			added[name] = true
			w.add(join(path, name), s, appended(cur, d), false)
		}
		return
	}
	for j := range cur.Len() {
		w.add(path, s, without(cur, j), false)
		// The fields of an element are facts of their own; a word of a
		// list of words (cpu.flags) is not: dropping and adding words
		// covers it.
		if et.Kind() == reflect.Struct || et.Kind() == reflect.Pointer {
			w.walk(path, indexSlot(s, t, j), et, pool, true)
		}
	}
	have := map[string]bool{}
	for j := range cur.Len() {
		have[valueKey(cur.Index(j))] = true
	}
	var extra []reflect.Value
	for _, d := range pool {
		if k := valueKey(d); !have[k] {
			have[k] = true
			extra = append(extra, d)
		}
	}
	for i, d := range extra {
		if i < maxAlternatives {
			w.add(path, s, appended(cur, d), false)
		}
	}
	if len(extra) > 1 {
		w.add(path, s, appended(cur, extra...), false)
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fieldSlot is field i of the struct at s.
func fieldSlot(s slot, t reflect.Type, i int) slot {
	return slot{
		get: func() reflect.Value { return s.get().Field(i) },
		set: func(nv reflect.Value) {
			c := reflect.New(t).Elem()
			c.Set(s.get())
			c.Field(i).Set(nv)
			s.set(c)
		},
	}
}

// elemSlot is what the non-nil pointer at s points to.
func elemSlot(s slot, t reflect.Type) slot {
	return slot{
		get: func() reflect.Value { return s.get().Elem() },
		set: func(nv reflect.Value) { s.set(pointerTo(nv)) },
	}
}

// entrySlot is the entry k of the map at s; setting the zero Value deletes it.
func entrySlot(s slot, t reflect.Type, k reflect.Value) slot {
	return slot{
		get: func() reflect.Value { return s.get().MapIndex(k) },
		set: func(nv reflect.Value) {
			old := s.get()
			m := reflect.MakeMapWithSize(t, old.Len()+1)
			for it := old.MapRange(); it.Next(); {
				m.SetMapIndex(it.Key(), it.Value())
			}
			m.SetMapIndex(k, nv)
			s.set(m)
		},
	}
}

// indexSlot is element j of the list at s.
func indexSlot(s slot, t reflect.Type, j int) slot {
	return slot{
		get: func() reflect.Value { return s.get().Index(j) },
		set: func(nv reflect.Value) {
			old := s.get()
			c := reflect.MakeSlice(t, old.Len(), old.Len())
			reflect.Copy(c, old)
			c.Index(j).Set(nv)
			s.set(c)
		},
	}
}

func pointerTo(v reflect.Value) reflect.Value {
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	return p
}

// appended is l with vs appended, in a new array: each mutation needs its
// own.
func appended(l reflect.Value, vs ...reflect.Value) reflect.Value {
	c := reflect.MakeSlice(l.Type(), 0, l.Len()+len(vs))
	c = reflect.AppendSlice(c, l)
	return reflect.Append(c, vs...)
}

// without is the list l without element j, in a new array.
func without(l reflect.Value, j int) reflect.Value {
	c := reflect.MakeSlice(l.Type(), 0, l.Len()-1)
	c = reflect.AppendSlice(c, l.Slice(0, j))
	return reflect.AppendSlice(c, l.Slice(j+1, l.Len()))
}

func sortedKeys(m reflect.Value) []reflect.Value {
	ks := m.MapKeys()
	sort.Slice(ks, func(i, j int) bool { return ks[i].String() < ks[j].String() })
	return ks
}

// valueKey identifies a value for deduplication.
func valueKey(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint64, reflect.String:
		return fmt.Sprintf("%q", fmt.Sprint(v.Interface()))
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprintf("%#v", v.Interface())
	}
	return string(b)
}

// distinct returns at most maxAlternatives values of vs that differ from
// each other and from cur (when valid), in order.
func distinct(vs []reflect.Value, cur reflect.Value) []reflect.Value {
	return distinctN(vs, cur, maxAlternatives)
}

// distinctN is distinct with at most n values.
func distinctN(vs []reflect.Value, cur reflect.Value, n int) []reflect.Value {
	seen := map[string]bool{}
	if cur.IsValid() {
		seen[valueKey(cur)] = true
	}
	var out []reflect.Value
	for _, v := range vs {
		if k := valueKey(v); !seen[k] && len(out) < n {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

// scalarAlternatives are the values a scalar takes on the other hosts plus
// a few that cross the thresholds checks use: the opposite of a bool, 1 and
// a large number, a low and a high version, a word no check expects.
func scalarAlternatives(cur reflect.Value, donors []reflect.Value) []reflect.Value {
	t := cur.Type()
	vs := slices.Clone(donors)
	add := func(x any) { vs = append(vs, reflect.ValueOf(x).Convert(t)) }
	switch t.Kind() {
	case reflect.Bool:
		add(!cur.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		add(1)
		add(cur.Int() + 1)
		add(1 << 40)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		add(1)
		add(cur.Uint() + 1)
		add(uint64(1) << 40)
	case reflect.String:
		add("0.1")
		add("999.0")
		add("perturbed")
	default:
		return nil
	}
	// The synthetic values come last: distinct keeps the first ones, and
	// the other hosts' values are the realistic ones.
	return distinct(vs, cur)
}

// verifier accumulates, over the hosts, what each check was seen to read.
type verifier struct {
	// reads[id][path] is where changing path changed the status of
	// check id: "host on platform".
	reads map[string]map[string][]string
	// shown[id] holds the paths whose change changed the status or only
	// the message of check id: what it reads to judge or to tell.
	shown map[string]map[string]bool
	// checks are the checks seen, by ID, from the catalogue of the host
	// they were first seen on.
	checks map[string]check.Check
	order  []string
	// observed is whether the check ran without panicking on some host.
	observed map[string]bool
	// selfHandled[id] holds the undeclared reads that check id turned
	// into an unknown result by itself.
	selfHandled map[string]map[string]bool
}

func newVerifier() *verifier {
	return &verifier{reads: map[string]map[string][]string{}, shown: map[string]map[string]bool{},
		checks: map[string]check.Check{}, observed: map[string]bool{}, selfHandled: map[string]map[string]bool{}}
}

// reps returns the platforms on which c is evaluated on f. A host-wide
// check needs one. A RunFor check gets one platform per group that shares
// its result (its Key or KeyFacts), as many as it takes for every value of
// every platform dimension the key depends on to appear: the facts a check
// reads depend on the kind of platform, not on every combination, and
// hundreds of platforms per perturbation would make the test slow. A
// check that applies to no platform is evaluated on all of them: its
// function still reads facts.
func reps(c *check.Check, f *facts.Facts, ps []platform.Platform) []platform.Platform {
	var app []platform.Platform
	for _, p := range ps {
		if _, ok := c.Applies(p); ok {
			app = append(app, p)
		}
	}
	if len(app) == 0 {
		app = ps
	}
	if c.Run != nil {
		return app[:1]
	}
	var out []platform.Platform
	seenKey := map[platform.Spec]bool{}
	seen := map[string]bool{}
	for _, p := range app {
		var k platform.Spec
		switch {
		case c.Key != 0:
			k = c.Key.Of(p.Spec())
		case c.KeyFacts != nil:
			k = c.KeyFacts(f, p)
		default:
			k = p.Spec()
		}
		if seenKey[k] {
			continue
		}
		seenKey[k] = true
		// A key that is the whole platform (a configured runtime
		// handler) is a kind of its own.
		features := []string{fmt.Sprint("distribution ", k.Distribution), fmt.Sprint("hypervisor ", k.Hypervisor),
			fmt.Sprint("tee ", k.TEE), fmt.Sprint("line ", k.ProductLine), fmt.Sprint("snapshotter ", k.Snapshotter),
			fmt.Sprint("gpu ", k.GPU), fmt.Sprint("debug ", k.Debug), fmt.Sprint("whole ", k == p.Spec())}
		fresh := false
		for _, ft := range features {
			if !seen[ft] {
				seen[ft], fresh = true, true
			}
		}
		if fresh {
			out = append(out, p)
		}
	}
	return out
}

// absent is the status of a check the catalogue no longer has (a plug-in
// check whose plug-in was dropped); noRun that of a check that panicked,
// which says nothing about what it reads.
const (
	absent check.Status = 0
	noRun  check.Status = 0xff
)

// result is what a check's own function returned, or absent or noRun.
type result struct {
	status  check.Status
	message string
}

// resultOf runs c's own function on f and p.
func resultOf(c *check.Check, f *facts.Facts, p platform.Platform) (r result) {
	if c == nil {
		return result{status: absent}
	}
	defer func() {
		if recover() != nil {
			r = result{status: noRun}
		}
	}()
	var res check.Result
	if c.Run != nil {
		res = c.Run(f)
	} else {
		res = c.RunFor(f, p)
	}
	return result{res.Status, res.Message}
}

// catalogue indexes For(f) by ID.
func catalogue(f *facts.Facts) map[string]*check.Check {
	cs := For(f)
	m := make(map[string]*check.Check, len(cs))
	for i := range cs {
		m[cs[i].ID] = &cs[i]
	}
	return m
}

// set replaces the value at m's path and returns what restores it.
func (m mutation) apply() (restore func()) {
	old := m.at.get()
	if old.IsValid() {
		c := reflect.New(old.Type()).Elem()
		c.Set(old)
		old = c
	}
	m.at.set(m.to)
	return func() { m.at.set(old) }
}

// host verifies the reads on one host: it applies each mutation in turn,
// notes which checks changed result, and restores the document; then it
// makes each fact a check read here unknown.
func (v *verifier) host(t *testing.T, name string, f *facts.Facts, muts []mutation, ps []platform.Platform) {
	t.Helper()
	cs := For(f)
	// Plug-in checks are made from the facts: their catalogue is rebuilt
	// for each mutation.
	dynamic := len(cs) != len(All())
	var ts []*target
	for i := range cs {
		c := &cs[i]
		if _, ok := v.checks[c.ID]; !ok {
			v.checks[c.ID] = *c
			v.order = append(v.order, c.ID)
		}
		tg := &target{id: c.ID, reps: reps(c, f, ps)}
		for _, p := range tg.reps {
			r := resultOf(c, f, p)
			if r.status != noRun {
				v.observed[c.ID] = true
			}
			tg.base = append(tg.base, r)
			tg.read = append(tg.read, map[string]bool{})
		}
		ts = append(ts, tg)
	}
	byID := catalogue(f)
	// screened[s] holds the checks a coarse mutation of section s
	// changed. The top-level sections ("kernel") are screened for every
	// check, their sections ("kernel.config") for the checks screened in
	// by the top level, and the fine mutations for those screened in by
	// their section.
	screened := map[string][]*target{}
	for stage := range 3 {
		for _, m := range muts {
			dotted := strings.Contains(m.path, ".")
			var candidates []*target
			switch {
			case stage == 0 && m.coarse && !dotted:
				candidates = ts
			case stage == 1 && m.coarse && dotted:
				candidates = screened[m.path[:strings.IndexByte(m.path, '.')]]
			case stage == 2 && !m.coarse:
				candidates = screened[section(m.path)]
			}
			if len(candidates) == 0 || m.noop() {
				continue
			}
			restore := m.apply()
			cat := byID
			if dynamic {
				cat = catalogue(f)
			}
			for _, tg := range candidates {
				switch {
				case stage == 2:
					tg.note(v, cat[tg.id], f, m.path)
				case !slices.Contains(screened[m.path], tg) && tg.changed(cat[tg.id], f):
					screened[m.path] = append(screened[m.path], tg)
				}
			}
			restore()
		}
	}

	unknown := map[string][]mutation{}
	for _, m := range muts {
		if m.unknown {
			unknown[m.path] = append(unknown[m.path], m)
		}
	}
	for _, tg := range ts {
		for j, p := range tg.reps {
			for _, path := range slices.Sorted(maps.Keys(tg.read[j])) {
				if v.reads[tg.id] == nil {
					v.reads[tg.id] = map[string][]string{}
				}
				v.reads[tg.id][path] = append(v.reads[tg.id][path], name+" on "+p.String())
				v.unknownNeverJudged(t, name, f, tg.id, p, path, unknown[path])
			}
		}
	}
}

// target is one check evaluated on one host.
type target struct {
	id   string
	reps []platform.Platform
	base []result
	// read[j] holds the paths check id reads on reps[j].
	read []map[string]bool
}

// changed reports whether c, the check in the changed document's
// catalogue, gives another result than on the host as it is. A panic is a
// change too: the check dereferenced something in the section.
func (tg *target) changed(c *check.Check, f *facts.Facts) bool {
	for j, p := range tg.reps {
		if base := tg.base[j]; base.status != noRun {
			if r := resultOf(c, f, p); r != base {
				return true
			}
		}
	}
	return false
}

// note records what changing path changed in c's results.
func (tg *target) note(v *verifier, c *check.Check, f *facts.Facts, path string) {
	for j, p := range tg.reps {
		base := tg.base[j]
		if base.status == noRun {
			continue
		}
		r := resultOf(c, f, p)
		if r.status == noRun || r == base {
			continue
		}
		if v.shown[tg.id] == nil {
			v.shown[tg.id] = map[string]bool{}
		}
		v.shown[tg.id][path] = true
		if r.status != base.status {
			tg.read[j][path] = true
		}
	}
}

// noop reports whether m sets the value the document already has.
func (m mutation) noop() bool {
	cur := m.at.get()
	if cur.IsValid() != m.to.IsValid() {
		return false
	}
	return !cur.IsValid() || reflect.DeepEqual(cur.Interface(), m.to.Interface())
}

// unknownNeverJudged makes path unknown on f, as discovery records a fact
// it could not read (zeroed or absent, with an entry in Facts.Unknown),
// and evaluates check id alone (its parent left out) on p: it must come
// out unknown or skipped. zero are the mutations that zero the value at
// path; where this host has none (no such binary, map key or list
// element) the entry in Facts.Unknown alone must do.
func (v *verifier) unknownNeverJudged(t *testing.T, host string, f *facts.Facts, id string, p platform.Platform, path string, zero []mutation) {
	t.Helper()
	if m := paramModule(path); m != "" && module(f, m).Present() {
		return
	}
	restores := make([]func(), len(zero))
	for i, m := range zero {
		restores[i] = m.apply()
	}
	saved := f.Unknown
	f.Unknown = append(slices.Clone(saved), facts.Missing{Field: path, Reason: facts.ReasonOffline + ": made unknown by TestReadsAreVerified"})
	defer func() {
		f.Unknown = saved
		for i := len(restores) - 1; i >= 0; i-- {
			restores[i]()
		}
	}()
	// The catalogue of the changed document: a plug-in check is made
	// from the facts.
	c := catalogue(f)[id]
	if c == nil {
		return
	}
	alone := *c
	alone.Parent = ""
	e, err := check.NewEvaluator([]check.Check{alone})
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	var vd []check.Verdict
	func() {
		defer func() {
			if x := recover(); x != nil {
				t.Errorf("%s on %s (%s): panics with %s unknown: %v", id, p, host, path, x)
			}
		}()
		vd = e.Evaluate(f, []platform.Platform{p}, check.Options{})
	}()
	if len(vd) == 0 || len(vd[0].Findings) == 0 {
		// The check does not apply to p: it was evaluated there only
		// because it applies nowhere.
		return
	}
	fd := vd[0].Findings[0]
	if fd.Raw != check.Unknown && fd.Raw != check.Skip {
		t.Errorf("%s on %s (%s): %s with %s unknown (%q): declare it in Reads/ReadsFor, or return unknown when it is",
			id, p, host, fd.Raw, path, fd.Message)
		return
	}
	if !slices.ContainsFunc(declaredOn(*c, p), func(d string) bool { return related(d, path) }) {
		if v.selfHandled[id] == nil {
			v.selfHandled[id] = map[string]bool{}
		}
		v.selfHandled[id][path] = true
	}
}

// paramModule returns the module whose parameter the fact at path is.
// Discovery lists such a fact as unknown both when the module is not
// loaded and when the loaded module has no such parameter; checks take the
// latter as the answer (a kvm_amd without sev_snp is a kernel without SNP
// host support), so the fact is made unknown only where its module is not
// loaded.
func paramModule(path string) string {
	switch path {
	case "tee.snp.kvmSev", "tee.snp.kvmSevEs", "tee.snp.kvmSevSnp":
		return "kvm_amd"
	case "tee.tdx.kvmTdx", "tee.sgx.kvmSgx":
		return "kvm_intel"
	}
	return ""
}

// related reports whether declaring d covers reading x: the same fact, or
// one a parent of the other, which the evaluator makes unknown together.
func related(d, x string) bool {
	return d == x || strings.HasPrefix(x, d+".") || strings.HasPrefix(d, x+".")
}

// report checks that every check reads something and reads what it
// declares, and logs what each reads.
func (v *verifier) report(t *testing.T, ps []platform.Platform) {
	t.Helper()
	withReads := 0
	for _, id := range v.order {
		c := v.checks[id]
		reads := v.reads[id]
		if len(reads) == 0 {
			if !v.observed[id] {
				t.Errorf("%s: panics on every host, so what it reads cannot be verified", id)
				continue
			}
			t.Errorf("%s: no fact changes its result on any host: it judges nothing, or no host varies what it reads (add a host or a case that does)", id)
			continue
		}
		withReads++
		paths := slices.Sorted(maps.Keys(reads))
		t.Logf("%s reads %s", id, strings.Join(paths, ", "))
		if sh := v.selfHandled[id]; len(sh) > 0 {
			t.Logf("%s returns unknown by itself when %s is unknown", id, strings.Join(slices.Sorted(maps.Keys(sh)), ", "))
		}
		// Every declared fact is read: it changes the status, or at
		// least the message (a value named for the reader).
		seen := map[string]bool{}
		for _, p := range ps {
			if _, ok := c.Applies(p); !ok {
				continue
			}
			for _, d := range declaredOn(c, p) {
				if seen[d] {
					continue
				}
				seen[d] = true
				if !slices.ContainsFunc(slices.Collect(maps.Keys(v.shown[id])), func(x string) bool { return related(d, x) }) {
					t.Errorf("%s declares it reads %s, but changing it never changes its result on any host", id, d)
				}
			}
		}
	}
	t.Logf("checks with verified reads: %d / %d", withReads, len(v.order))
}

// declaredOn is what c declares it reads on p.
func declaredOn(c check.Check, p platform.Platform) []string {
	ds := slices.Clone(c.Reads)
	if c.ReadsFor != nil {
		ds = append(ds, c.ReadsFor(p)...)
	}
	return ds
}
