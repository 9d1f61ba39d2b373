package nodereport

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/testkit/testhosts"
)

// TestConditionsTransitions walks one node through its life, each step's
// conditions computed from the previous step's as the agent does: a
// node evaluated with nothing requested, the node-installer's record
// arriving (not ready, then installed), an installed platform failing its
// checks, an install failing on a node that worked, the node repaired,
// and the record removed by cleanup. Each step names the status and
// reason of each condition and a word of its message; a condition's
// lastTransitionTime must be the step's time exactly when its status
// changed, and the earlier time otherwise.
func TestConditionsTransitions(t *testing.T) {
	const snp, tdx = "kubeadm-qemu-snp", "kubeadm-qemu-tdx"
	plats := func(vs ...v1alpha1.PlatformVerdict) []v1alpha1.PlatformVerdict { return vs }
	ready := func(n string) v1alpha1.PlatformVerdict {
		return v1alpha1.PlatformVerdict{Name: n, Verdict: v1alpha1.VerdictReady}
	}
	notReady := func(n, b string) v1alpha1.PlatformVerdict {
		return v1alpha1.PlatformVerdict{Name: n, Verdict: v1alpha1.VerdictNotReady, FirstBlocker: b}
	}
	record := func(ps ...v1alpha1.PlatformInstall) *v1alpha1.InstallStatus {
		return &v1alpha1.InstallStatus{Version: "3.24.0", Platforms: ps}
	}
	pi := func(n string, s v1alpha1.InstallState, e string) v1alpha1.PlatformInstall {
		return v1alpha1.PlatformInstall{Name: n, State: s, Error: e}
	}
	type want struct {
		status metav1.ConditionStatus
		reason string
		word   string
	}
	steps := []struct {
		name                       string
		platforms                  []v1alpha1.PlatformVerdict
		install                    *v1alpha1.InstallStatus
		ready, installed, degraded want
	}{
		{"nothing evaluated", nil, nil,
			want{"Unknown", ReasonNotEvaluated, "no platform"}, want{"False", ReasonNotInstalled, "no node-installer"}, want{"False", ReasonNoFailure, ""}},
		{"evaluated, nothing requested", plats(ready(snp), notReady(tdx, "tee.tdx.module")), nil,
			want{"True", ReasonPlatformReady, "1 of 2"}, want{"False", ReasonNotInstalled, ""}, want{"False", ReasonNoFailure, ""}},
		{"requested, not ready", plats(ready(snp), notReady(tdx, "tee.tdx.module")), record(pi(tdx, v1alpha1.InstallNotReady, "tee.tdx.module: not initialised")),
			want{"False", ReasonNoRequestedPlatformReady, "kubeadm-qemu-tdx (tee.tdx.module)"}, want{"False", ReasonPlatformNotReady, "not installed, the node is not ready for them: kubeadm-qemu-tdx"}, want{"False", ReasonNoFailure, ""}},
		{"installed", plats(ready(snp), notReady(tdx, "tee.tdx.module")), record(pi(snp, v1alpha1.InstallInstalled, "")),
			want{"True", ReasonPlatformReady, "requested platforms that can run here: kubeadm-qemu-snp"}, want{"True", ReasonInstalled, "release 3.24.0"}, want{"False", ReasonNoFailure, ""}},
		{"installed, rerun with a second platform", plats(ready(snp), ready(tdx)), record(pi(snp, v1alpha1.InstallInstalled, ""), pi(tdx, v1alpha1.InstallInstalled, "")),
			want{"True", ReasonPlatformReady, "kubeadm-qemu-snp, kubeadm-qemu-tdx"}, want{"True", ReasonInstalled, "kubeadm-qemu-tdx"}, want{"False", ReasonNoFailure, ""}},
		{"an installed platform fails its checks", plats(notReady(snp, "tee.snp.firmware"), ready(tdx)), record(pi(snp, v1alpha1.InstallInstalled, ""), pi(tdx, v1alpha1.InstallInstalled, "")),
			want{"True", ReasonPlatformReady, "kubeadm-qemu-tdx"}, want{"True", ReasonInstalled, ""}, want{"True", ReasonInstalledPlatformNotReady, "kubeadm-qemu-snp (tee.snp.firmware)"}},
		{"the next install finds it not ready", plats(notReady(snp, "tee.snp.firmware"), ready(tdx)), record(pi(snp, v1alpha1.InstallNotReady, "tee.snp.firmware: too old"), pi(tdx, v1alpha1.InstallInstalled, "")),
			want{"True", ReasonPlatformReady, "kubeadm-qemu-tdx"}, want{"False", ReasonPlatformNotReady, ": kubeadm-qemu-snp"}, want{"True", ReasonPlatformNotReady, "was Installed and is not any more"}},
		{"an install fails while degraded", plats(ready(snp), ready(tdx)), record(pi(snp, v1alpha1.InstallFailed, "handler not live"), pi(tdx, v1alpha1.InstallFailed, "handler not live")),
			want{"True", ReasonPlatformReady, ""}, want{"False", ReasonInstallFailed, "failed to install (report.install says why): kubeadm-qemu-snp, kubeadm-qemu-tdx"}, want{"True", ReasonInstallFailed, "was Installed and is not any more"}},
		{"repaired", plats(ready(snp), ready(tdx)), record(pi(snp, v1alpha1.InstallInstalled, ""), pi(tdx, v1alpha1.InstallInstalled, "")),
			want{"True", ReasonPlatformReady, ""}, want{"True", ReasonInstalled, ""}, want{"False", ReasonNoFailure, ""}},
		{"cleaned up", plats(ready(snp), ready(tdx)), nil,
			want{"True", ReasonPlatformReady, "none was requested"}, want{"False", ReasonNotInstalled, ""}, want{"False", ReasonNoFailure, ""}},
		{"requested again, the install fails at once", plats(ready(snp)), record(pi(snp, v1alpha1.InstallFailed, "download failed")),
			want{"True", ReasonPlatformReady, ""}, want{"False", ReasonInstallFailed, "failed to install (report.install says why): kubeadm-qemu-snp"}, want{"False", ReasonNoFailure, ""}},
	}
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	var prev []metav1.Condition
	for i, s := range steps {
		now := start.Add(time.Duration(i) * time.Minute)
		r := v1alpha1.Report{Platforms: s.platforms, Install: s.install}
		for _, p := range s.platforms {
			switch p.Verdict {
			case v1alpha1.VerdictReady:
				r.Summary.Ready++
			case v1alpha1.VerdictNotReady:
				r.Summary.NotReady++
			}
		}
		got := Conditions(prev, r, now.Add(123*time.Millisecond))
		if len(got) != 3 || got[0].Type != v1alpha1.ConditionReady || got[1].Type != v1alpha1.ConditionInstalled || got[2].Type != v1alpha1.ConditionDegraded {
			t.Fatalf("step %q: conditions %+v, want Ready, Installed, Degraded", s.name, got)
		}
		for j, w := range []want{s.ready, s.installed, s.degraded} {
			c := got[j]
			if c.Status != w.status || c.Reason != w.reason || !strings.Contains(c.Message, w.word) {
				t.Errorf("step %q: %s is %s %s %q, want %s %s with %q", s.name, c.Type, c.Status, c.Reason, c.Message, w.status, w.reason, w.word)
			}
			if c.ObservedGeneration != 0 {
				t.Errorf("step %q: %s has observedGeneration %d", s.name, c.Type, c.ObservedGeneration)
			}
			changed := i == 0 || prev[j].Status != c.Status
			switch {
			case changed && !c.LastTransitionTime.Time.Equal(now):
				t.Errorf("step %q: %s changed status but its lastTransitionTime is %v, want %v", s.name, c.Type, c.LastTransitionTime, now)
			case !changed && !c.LastTransitionTime.Equal(&prev[j].LastTransitionTime):
				t.Errorf("step %q: %s kept its status but its lastTransitionTime moved from %v to %v", s.name, c.Type, prev[j].LastTransitionTime, c.LastTransitionTime)
			}
		}
		if again := Conditions(got, r, now.Add(time.Hour)); !SameConditions(again, got) {
			t.Errorf("step %q: the same report an hour later changes the conditions:\n%+v\n%+v", s.name, got, again)
		}
		prev = got
	}
}

// TestConditionsDropForeign: a condition of another type in the stored
// report is not the agent's, which owns the report, and is dropped.
func TestConditionsDropForeign(t *testing.T) {
	prev := []metav1.Condition{{Type: "Custom", Status: "True", Reason: "X", LastTransitionTime: metav1.Now()}}
	got := Conditions(prev, v1alpha1.Report{}, time.Now())
	for _, c := range got {
		if c.Type == "Custom" {
			t.Errorf("kept %+v", c)
		}
	}
}

// maxConditionsBytes is the size budget of status.conditions as JSON:
// three conditions with messages at MaxConditionMessage.
const maxConditionsBytes = 3 * (MaxConditionMessage + 140)

// TestConditionsSizeBudget computes the conditions of every fixture
// host's report with the worst install status (40 platforms, long names,
// all failed, after the node was Installed, so that every message is as
// long as it gets) and checks they stay within maxConditionsBytes, and
// logs the whole object's size.
func TestConditionsSizeBudget(t *testing.T) {
	largest, largestHost := 0, ""
	for _, h := range testhosts.Names(t) {
		r := WithInstall(fixtureReport(t, h), new(worstInstall()))
		was := WithInstall(fixtureReport(t, h), &v1alpha1.InstallStatus{Platforms: []v1alpha1.PlatformInstall{{Name: "x", State: v1alpha1.InstallInstalled}}})
		conds := Conditions(Conditions(nil, was, time.Now()), r, time.Now())
		b, err := json.Marshal(v1alpha1.NodeReportStatus{Conditions: conds})
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > maxConditionsBytes {
			t.Errorf("%s: conditions are %d bytes, want at most %d", h, len(b), maxConditionsBytes)
		}
		for _, c := range conds {
			if len(c.Message) > MaxConditionMessage {
				t.Errorf("%s: %s message is %d bytes", h, c.Type, len(c.Message))
			}
		}
		whole, err := json.Marshal(v1alpha1.NodeReport{Report: r, Status: v1alpha1.NodeReportStatus{Conditions: conds}})
		if err != nil {
			t.Fatal(err)
		}
		if len(whole) > largest {
			largest, largestHost = len(whole), h
		}
	}
	t.Logf("largest report and conditions with the worst install status: %s, %d bytes", largestHost, largest)
}
