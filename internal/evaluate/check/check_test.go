package check

import (
	"fmt"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

func mustPlatform(t testing.TB, s string) platform.Platform {
	t.Helper()
	p, err := platform.Parse(s)
	if err != nil {
		t.Fatalf("platform.Parse(%q): %v", s, err)
	}
	return p
}

func fixed(st Status) func(*facts.Facts) Result {
	return func(*facts.Facts) Result {
		return Result{Status: st, Message: st.String(), Remedy: "do " + st.String()}
	}
}

func cat(parentStatus, childStatus Status, childSev Severity) []Check {
	base := Check{Why: "w", Platforms: "all", Remedies: []string{"r"}, Applies: Always(Blocking)}
	a, b, c := base, base, base
	a.ID, a.Title, a.Run = "a.root", "root", fixed(parentStatus)
	b.ID, b.Title, b.Parent, b.Run, b.Applies = "a.child", "child", "a.root", fixed(childStatus), Always(childSev)
	c.ID, c.Title, c.Run, c.Reads = "b.reads", "reads", fixed(Pass), []string{"devices.kvm"}
	return []Check{a, b, c}
}

func TestEvaluateTreeAndSeverity(t *testing.T) {
	p := mustPlatform(t, "kubeadm-qemu-none")
	tests := []struct {
		name          string
		parent, child Status
		sev           Severity
		opt           Options
		unknown       bool
		want          VerdictStatus
		wantChild     Status
		blockedBy     string
	}{
		{"all pass", Pass, Pass, Blocking, Options{}, false, Ready, Pass, ""},
		{"parent fails: child skipped", Fail, Fail, Blocking, Options{}, false, NotReady, Skip, "a.root"},
		{"child fails with warning severity", Pass, Fail, Warning, Options{}, false, ReadyWithWarnings, Warn, ""},
		{"child warns", Pass, Warn, Blocking, Options{}, false, ReadyWithWarnings, Warn, ""},
		{"strict turns warning into failure", Pass, Warn, Blocking, Options{Strict: true}, false, NotReady, Fail, "a.child"},
		{"ignore demotes", Pass, Fail, Blocking, Options{Ignore: Ignore{ids: []string{"a.child"}}}, false, ReadyWithWarnings, Warn, ""},
		{"ignored stays a warning under strict", Pass, Fail, Blocking, Options{Ignore: Ignore{ids: []string{"a.child"}}, Strict: true}, false, ReadyWithWarnings, Warn, ""},
		{"ignored parent still skips children", Fail, Pass, Blocking, Options{Ignore: Ignore{all: true}}, false, ReadyWithWarnings, Skip, ""},
		{"unknown evidence is never a pass", Pass, Pass, Blocking, Options{}, true, ReadyWithWarnings, Pass, ""},
		{"unknown fails under strict", Pass, Pass, Blocking, Options{Strict: true}, true, NotReady, Pass, "b.reads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewEvaluator(cat(tt.parent, tt.child, tt.sev))
			if err != nil {
				t.Fatal(err)
			}
			f := &facts.Facts{}
			if tt.unknown {
				f.Unknown = []facts.Missing{{Field: "devices", Reason: facts.ReasonOffline}}
			}
			v := e.Evaluate(f, []platform.Platform{p}, tt.opt)[0]
			if v.Status != tt.want || v.BlockedBy != tt.blockedBy {
				t.Errorf("verdict %s blocked by %q, want %s blocked by %q", v.Status, v.BlockedBy, tt.want, tt.blockedBy)
			}
			if got := v.Findings[1].Status; got != tt.wantChild {
				t.Errorf("child %s, want %s", got, tt.wantChild)
			}
			if tt.unknown {
				if got := v.Findings[2].Status; got != Unknown && got != Fail {
					t.Errorf("check reading an unknown field: %s, want unknown", got)
				}
			}
		})
	}
}

func TestNewEvaluatorRejects(t *testing.T) {
	c := cat(Pass, Pass, Blocking)
	c[1].Parent = "nope"
	if _, err := NewEvaluator(c); err == nil {
		t.Error("unknown parent accepted")
	}
	c = cat(Pass, Pass, Blocking)
	c[2].ID = "a.root"
	if _, err := NewEvaluator(c); err == nil {
		t.Error("duplicate ID accepted")
	}
	c = cat(Pass, Pass, Blocking)
	c[0].RunFor = func(*facts.Facts, platform.Platform) Result { return Result{} }
	if _, err := NewEvaluator(c); err == nil {
		t.Error("Run and RunFor both set accepted")
	}
}

func TestParseIgnore(t *testing.T) {
	known := func(id string) bool { return id == "kvm.device.usable" || id == "tdx.sgx" }
	tests := []struct {
		in      []string
		wantErr bool
		match   map[string]bool
	}{
		{[]string{"KVM.Device.Usable"}, false, map[string]bool{"kvm.device.usable": true, "tdx.sgx": false}},
		{[]string{"kvm.device.usable,TDX.SGX"}, false, map[string]bool{"kvm.device.usable": true, "tdx.sgx": true}},
		{[]string{"kvm.device.usable", "tdx.sgx"}, false, map[string]bool{"tdx.sgx": true}},
		{[]string{"all"}, false, map[string]bool{"anything.at.all": true}},
		{[]string{"ALL"}, false, map[string]bool{"tdx.sgx": true}},
		{[]string{"all,tdx.sgx"}, true, nil},
		{[]string{"all", "tdx.sgx"}, true, nil},
		{[]string{"kvm.devise.usable"}, true, nil},
		{nil, false, map[string]bool{"tdx.sgx": false}},
	}
	for _, tt := range tests {
		ig, err := ParseIgnore(tt.in, known)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseIgnore(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		for id, want := range tt.match {
			if got := ig.Matches(id); got != want {
				t.Errorf("ParseIgnore(%q).Matches(%q) = %v, want %v", tt.in, id, got, want)
			}
		}
	}
}

// TestFindingsShared: verdicts share memory (a debug twin whose findings
// equal its base's shares the base's slice), so every Findings slice is
// capped at its length: a caller that appends gets a copy and cannot
// overwrite another platform's findings. Verdicts are read-only values.
func TestFindingsShared(t *testing.T) {
	e, err := NewEvaluator(cat(Pass, Fail, Blocking))
	if err != nil {
		t.Fatal(err)
	}
	ps := []platform.Platform{mustPlatform(t, "kubeadm-qemu-none"), mustPlatform(t, "kubeadm-qemu-none+debug"), mustPlatform(t, "k3s-qemu-none")}
	vs := e.Evaluate(&facts.Facts{}, ps, Options{})
	for _, v := range vs {
		if len(v.Findings) != 3 || cap(v.Findings) != len(v.Findings) {
			t.Fatalf("%s: %d findings, capacity %d, want 3 and 3", v.Platform, len(v.Findings), cap(v.Findings))
		}
	}
	if &vs[0].Findings[0] != &vs[1].Findings[0] {
		t.Error("the debug twin does not share its base's findings")
	}
	if vs[1].Platform != "kubeadm-qemu-none+debug" || vs[1].Name != "kubeadm-qemu-none-debug" || vs[1].Status != NotReady || vs[1].BlockedBy != "a.child" {
		t.Errorf("twin verdict %+v", vs[1])
	}
	grown := append(vs[0].Findings, Finding{})
	if &grown[0] == &vs[0].Findings[0] || vs[2].Findings[0].ID != "a.root" {
		t.Error("appending to one platform's findings reached another's")
	}
}

// TestEv holds Ev to what fmt.Sprint prints for the kinds it formats
// itself, and to its own words for the rest.
func TestEv(t *testing.T) {
	type named int
	tr, zero := true, 0
	for _, tc := range []struct {
		value any
		want  string
	}{
		{"x", "x"},
		{"", `""`},
		{true, fmt.Sprint(true)},
		{false, fmt.Sprint(false)},
		{-42, fmt.Sprint(-42)},
		{int64(-1 << 62), fmt.Sprint(int64(-1 << 62))},
		{uint64(1 << 63), fmt.Sprint(uint64(1 << 63))},
		{&tr, "true"},
		{(*bool)(nil), "not reported"},
		{&zero, "0"},
		{(*int)(nil), "not reported"},
		{[]string{"a", "b"}, "[a b]"},
		{named(7), fmt.Sprint(named(7))},
		{3.5, fmt.Sprint(3.5)},
	} {
		if got := Ev("f", tc.value); got.Field != "f" || got.Value != tc.want {
			t.Errorf("Ev(%T %v) = %+v, want %q", tc.value, tc.value, got, tc.want)
		}
	}
}
