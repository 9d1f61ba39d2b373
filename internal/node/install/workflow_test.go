package install

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// steps records what the workflow asked of its dependencies, in order.
type steps struct {
	log []string
	// refuse are the platforms the checker refuses; notLive those the
	// verifier does not find; verifyErr fails the verifier itself.
	refuse, notLive map[string]bool
	verifyErr       error
}

func (s *steps) Check(p platform.Platform) error {
	s.log = append(s.log, "check "+p.String())
	if s.refuse[p.String()] {
		return fmt.Errorf("platform %s is not ready", p)
	}
	return nil
}

func (s *steps) Apply(_ context.Context, p platform.Platform) (*configure.Result, error) {
	s.log = append(s.log, "apply "+p.String())
	return &configure.Result{Handler: p.Name(), Changed: []string{"etc/containerd/config.toml"}}, nil
}

func (s *steps) Restart(_ context.Context, p platform.Platform, res *configure.Result) error {
	s.log = append(s.log, "restart "+p.String()+" "+res.Handler)
	return nil
}

func (s *steps) Verify(_ context.Context, p platform.Platform) (configure.Verification, error) {
	s.log = append(s.log, "verify "+p.String())
	if s.verifyErr != nil {
		return configure.Verification{}, s.verifyErr
	}
	return configure.Verification{Platform: p.String(), Handler: p.Name(), Live: !s.notLive[p.String()], Runtime: "containerd 2.4.2"}, nil
}

func (s *steps) Installed(res *Result, _ time.Duration, err error) {
	s.log = append(s.log, fmt.Sprintf("installed %v", err == nil))
}

func (s *steps) Verified(v configure.Verification) {
	s.log = append(s.log, fmt.Sprintf("verified %s %v", v.Platform, v.Live))
}

func (s *steps) NotVerified(reason string) { s.log = append(s.log, "not verified: "+reason) }

func workflow(t *testing.T, s *steps, from ...string) *Workflow {
	return &Workflow{Installer: newEnv(t).installer(t, from...), Checker: s, Applier: s, Restarter: s, Verifier: s, Reporter: s}
}

func platforms(t *testing.T, names ...string) []platform.Platform {
	var ps []platform.Platform
	for _, n := range names {
		ps = append(ps, mustPlatform(t, n))
	}
	return ps
}

// TestWorkflowVerifiesEveryPlatform: every platform asked for is
// configured, then every one is verified and reported, even after one that
// is not live; the error names the ones not live.
func TestWorkflowVerifiesEveryPlatform(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	s := &steps{notLive: map[string]bool{"kubeadm-qemu-snp": true}}
	w := workflow(t, s, rel.mirror(t))
	ps := platforms(t, "kubeadm-qemu-snp", "kubeadm-qemu-tdx", "kubeadm-qemu-none")
	pl, err := w.Plan(rel.m, ps)
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.Run(context.Background(), pl)
	var nl *NotLiveError
	if !errors.As(err, &nl) || !slices.Equal(nl.Platforms, []string{"kubeadm-qemu-snp"}) || nl.Of != 3 || !IsFailure(err) {
		t.Fatalf("error %v, want the SNP platform not live of 3", err)
	}
	want := []string{
		"check kubeadm-qemu-snp", "check kubeadm-qemu-tdx", "check kubeadm-qemu-none",
		"installed true",
		"apply kubeadm-qemu-snp", "restart kubeadm-qemu-snp kubeadm-qemu-snp",
		"apply kubeadm-qemu-tdx", "restart kubeadm-qemu-tdx kubeadm-qemu-tdx",
		"apply kubeadm-qemu-none", "restart kubeadm-qemu-none kubeadm-qemu-none",
		"verify kubeadm-qemu-snp", "verified kubeadm-qemu-snp false",
		"verify kubeadm-qemu-tdx", "verified kubeadm-qemu-tdx true",
		"verify kubeadm-qemu-none", "verified kubeadm-qemu-none true",
	}
	if !slices.Equal(s.log, want) {
		t.Errorf("steps:\n  %s\nwant:\n  %s", strings.Join(s.log, "\n  "), strings.Join(want, "\n  "))
	}
	if len(out.Verified) != 3 || len(out.Applied) != 3 || out.Install == nil || !out.Install.Changed {
		t.Errorf("outcome %+v", out)
	}
	assertInstalled(t, w.Installer.Layout.Prefix, rel.expect(t, ps...))

	// All live: no error.
	s.log, s.notLive = nil, nil
	pl, err = w.Plan(rel.m, ps)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Run(context.Background(), pl); err != nil {
		t.Errorf("all live: %v", err)
	}
}

func TestWorkflowRefusesBeforeInstalling(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	s := &steps{refuse: map[string]bool{"kubeadm-qemu-tdx": true}}
	w := workflow(t, s, rel.mirror(t))
	ps := platforms(t, "kubeadm-qemu-snp", "kubeadm-qemu-tdx")
	if _, err := w.Plan(rel.m, ps); err == nil || !strings.Contains(err.Error(), "kubeadm-qemu-tdx is not ready") {
		t.Fatalf("plan: %v, want the TDX platform refused", err)
	}
	// A dry run reports every refusal and the plan.
	pl, refusals, err := w.DryRun(rel.m, ps)
	if err != nil || pl == nil || len(refusals) != 1 || !strings.Contains(refusals[0].Error(), "kubeadm-qemu-tdx") {
		t.Fatalf("dry run: plan %v refusals %v err %v", pl, refusals, err)
	}
	if st, err := w.Installer.Layout.Status(); err == nil && st.Current != nil {
		t.Errorf("something was installed: %+v", st.Current)
	}
}

func TestWorkflowWithoutConfigOrVerifier(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	ps := platforms(t, "kubeadm-qemu-snp")

	// --no-config: install only.
	s := &steps{}
	w := workflow(t, s, rel.mirror(t))
	w.Applier, w.Restarter, w.Verifier = nil, nil, nil
	pl, err := w.Plan(rel.m, ps)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Run(context.Background(), pl); err != nil || !slices.Equal(s.log, []string{"check kubeadm-qemu-snp", "installed true"}) {
		t.Errorf("no config: %v, steps %v", err, s.log)
	}

	// A root that is not running: configured, not verified, and why.
	s = &steps{}
	w = workflow(t, s, rel.mirror(t))
	w.Verifier, w.NoVerify = nil, "not a running system"
	pl, _ = w.Plan(rel.m, ps)
	if _, err := w.Run(context.Background(), pl); err != nil || s.log[len(s.log)-1] != "not verified: not a running system" {
		t.Errorf("offline root: %v, steps %v", err, s.log)
	}

	// A verifier that cannot run at all stops with its error.
	s = &steps{verifyErr: errors.New("berth-cluster not found")}
	w = workflow(t, s, rel.mirror(t))
	pl, _ = w.Plan(rel.m, ps)
	if _, err := w.Run(context.Background(), pl); err == nil || !strings.Contains(err.Error(), "berth-cluster not found") || IsFailure(err) {
		t.Errorf("verifier error: %v", err)
	}
}

func TestWorkflowInstallFailure(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	s := &steps{}
	w := workflow(t, s) // no mirror, and the URLs lead nowhere
	w.Installer.Fetcher.Attempts = 1
	pl, err := w.Plan(rel.m, platforms(t, "kubeadm-qemu-snp"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Run(context.Background(), pl)
	var ie *InstallError
	if !errors.As(err, &ie) || !IsFailure(err) {
		t.Fatalf("error %v, want an InstallError", err)
	}
	if !slices.Equal(s.log, []string{"check kubeadm-qemu-snp", "installed false"}) {
		t.Errorf("steps after a failed install: %v", s.log)
	}
}
