package nodereport

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/v1alpha1"
)

// The reasons of the conditions (CamelCase, as metav1.Condition wants).
const (
	// Ready.
	ReasonPlatformReady            = "PlatformReady"
	ReasonNoRequestedPlatformReady = "NoRequestedPlatformReady"
	ReasonNoPlatformReady          = "NoPlatformReady"
	ReasonNotEvaluated             = "NotEvaluated"
	// Installed (and Degraded, which repeats Installed's reason when an
	// install fails on a node that was Installed).
	ReasonInstalled        = "Installed"
	ReasonNotInstalled     = "NotInstalled"
	ReasonInstallFailed    = "InstallFailed"
	ReasonPlatformNotReady = "PlatformNotReady"
	// Degraded.
	ReasonInstalledPlatformNotReady = "InstalledPlatformNotReady"
	ReasonNoFailure                 = "NoFailure"
)

// Conditions are the conditions of the report r, given prev, those the
// stored report has: Ready, Installed and Degraded (v1alpha1.ConditionReady
// and the others), in that order. A condition whose status is prev's keeps
// prev's lastTransitionTime (meta.SetStatusCondition); one that changed
// status gets now. Conditions of other types in prev are dropped: the
// agent owns the report. observedGeneration stays 0 (NodeReportStatus).
//
// Requested platforms are those of the node-installer's record
// (r.Install). A requested platform can run here when the agent's verdict
// for it is ready or warn, or, when the agent did not evaluate it, when it
// is installed. Degraded is True while a platform recorded installed now
// fails its checks, or while the install fails (Installed False for a
// failure or a platform not ready) on a node that was Installed or
// already Degraded: a node that never worked is not degraded, it is not
// installed.
func Conditions(prev []metav1.Condition, r v1alpha1.Report, now time.Time) []metav1.Condition {
	verdict := map[string]v1alpha1.Verdict{}
	for _, p := range r.Platforms {
		verdict[p.Name] = p.Verdict
	}
	canRun := func(name string, st v1alpha1.InstallState) bool {
		v, ok := verdict[name]
		if !ok {
			return st == v1alpha1.InstallInstalled
		}
		return v == v1alpha1.VerdictReady || v == v1alpha1.VerdictWarn
	}
	var ready, installed, degraded metav1.Condition
	ready.Type, installed.Type, degraded.Type = v1alpha1.ConditionReady, v1alpha1.ConditionInstalled, v1alpha1.ConditionDegraded

	in := r.Install
	switch {
	case in == nil || len(in.Platforms) == 0:
		n := r.Summary.Ready + r.Summary.Warn
		switch {
		case len(r.Platforms) == 0:
			set(&ready, metav1.ConditionUnknown, ReasonNotEvaluated, "no platform was evaluated on this node")
		case n > 0:
			set(&ready, metav1.ConditionTrue, ReasonPlatformReady, fmt.Sprintf("%d of %d evaluated platforms can run here; none was requested (no node-installer record)", n, len(r.Platforms)))
		default:
			set(&ready, metav1.ConditionFalse, ReasonNoPlatformReady, fmt.Sprintf("none of the %d evaluated platforms can run here", len(r.Platforms)))
		}
		set(&installed, metav1.ConditionFalse, ReasonNotInstalled, "no node-installer has installed a platform on this node")
	default:
		var can, cannot, failed, notReady, ok, broken []string
		for _, p := range in.Platforms {
			if canRun(p.Name, p.State) {
				can = append(can, p.Name)
			} else {
				cannot = append(cannot, p.Name+blocker(r, p.Name))
			}
			switch p.State {
			case v1alpha1.InstallFailed:
				failed = append(failed, p.Name)
			case v1alpha1.InstallNotReady:
				notReady = append(notReady, p.Name)
			case v1alpha1.InstallInstalled:
				ok = append(ok, p.Name)
				if v, known := verdict[p.Name]; known && v == v1alpha1.VerdictNotReady {
					broken = append(broken, p.Name+blocker(r, p.Name))
				}
			}
		}
		// Listed, the rest counted: report.install keeps failed entries
		// first, and holds the errors the messages leave out.
		names := func(ns []string) string {
			s := strings.Join(ns, ", ")
			if in.PlatformsOmitted > 0 {
				s = fmt.Sprintf("(%d more not listed) %s", in.PlatformsOmitted, s)
			}
			return s
		}
		if len(can) > 0 {
			set(&ready, metav1.ConditionTrue, ReasonPlatformReady, "requested platforms that can run here: "+strings.Join(can, ", "))
		} else {
			set(&ready, metav1.ConditionFalse, ReasonNoRequestedPlatformReady, "no requested platform can run here: "+names(cannot))
		}
		switch {
		case len(failed) > 0:
			set(&installed, metav1.ConditionFalse, ReasonInstallFailed, "failed to install (report.install says why): "+names(failed))
		case len(notReady) > 0:
			set(&installed, metav1.ConditionFalse, ReasonPlatformNotReady, "not installed, the node is not ready for them: "+names(notReady))
		default:
			msg := "installed and proven live"
			if in.Version != "" {
				msg += ", release " + in.Version
			}
			set(&installed, metav1.ConditionTrue, ReasonInstalled, msg+": "+names(ok))
		}
		if len(broken) > 0 {
			set(&degraded, metav1.ConditionTrue, ReasonInstalledPlatformNotReady, "installed, now failing its checks: "+strings.Join(broken, ", "))
		}
	}
	if degraded.Status == "" {
		wasWorking := meta.IsStatusConditionTrue(prev, v1alpha1.ConditionInstalled) || meta.IsStatusConditionTrue(prev, v1alpha1.ConditionDegraded)
		if wasWorking && (installed.Reason == ReasonInstallFailed || installed.Reason == ReasonPlatformNotReady) {
			set(&degraded, metav1.ConditionTrue, installed.Reason, "the node was Installed and is not any more (see the Installed condition)")
		} else {
			set(&degraded, metav1.ConditionFalse, ReasonNoFailure, "no platform that worked here fails")
		}
	}
	var out []metav1.Condition
	for _, c := range prev {
		if c.Type == ready.Type || c.Type == installed.Type || c.Type == degraded.Type {
			out = append(out, c)
		}
	}
	t := metav1.NewTime(now.UTC().Truncate(time.Second))
	for _, c := range []metav1.Condition{ready, installed, degraded} {
		c.LastTransitionTime = t
		meta.SetStatusCondition(&out, c)
	}
	// One order whatever prev's was, so that equal conditions compare
	// equal.
	order := []string{ready.Type, installed.Type, degraded.Type}
	slices.SortFunc(out, func(a, b metav1.Condition) int {
		return slices.Index(order, a.Type) - slices.Index(order, b.Type)
	})
	return out
}

// SameConditions reports whether a and b say the same, times included:
// then the stored report need not be written for them.
func SameConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message &&
			x.ObservedGeneration == y.ObservedGeneration && x.LastTransitionTime.Equal(&y.LastTransitionTime)
	})
}

// MaxConditionMessage caps a condition's message: the report's own
// fields hold the details (report.install, report.platforms), and three
// conditions must fit the NodeReport's size budget beside them.
const MaxConditionMessage = 128

func set(c *metav1.Condition, status metav1.ConditionStatus, reason, msg string) {
	c.Status, c.Reason, c.Message = status, reason, clip(msg, MaxConditionMessage)
}

// blocker is " (first blocker B)" for a platform the agent found not
// ready, "" otherwise.
func blocker(r v1alpha1.Report, name string) string {
	for _, p := range r.Platforms {
		if p.Name == name && p.FirstBlocker != "" {
			return " (" + p.FirstBlocker + ")"
		}
	}
	return ""
}
