package nodeinstall

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestParseStartupTaint: --startup-taint as kubelet's
// --register-with-taints names a taint, and what it refuses.
func TestParseStartupTaint(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  corev1.Taint
		value bool
		any   bool
		err   string
	}{
		{in: "berth.dev/runtime-not-ready:NoSchedule", want: corev1.Taint{Key: "berth.dev/runtime-not-ready", Effect: corev1.TaintEffectNoSchedule}},
		{in: "runtime-not-ready:PreferNoSchedule", want: corev1.Taint{Key: "runtime-not-ready", Effect: corev1.TaintEffectPreferNoSchedule}},
		{in: "berth.dev/runtime-not-ready=true:NoExecute", want: corev1.Taint{Key: "berth.dev/runtime-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute}, value: true},
		{in: "berth.dev/runtime-not-ready=:NoSchedule", want: corev1.Taint{Key: "berth.dev/runtime-not-ready", Effect: corev1.TaintEffectNoSchedule}, value: true},
		// kata-deploy's bare key: that key's taints of any effect.
		{in: "berth.dev/runtime-not-ready", want: corev1.Taint{Key: "berth.dev/runtime-not-ready"}, any: true},
		{in: "berth.dev/runtime-not-ready=true", err: "expected KEY[=VALUE]:EFFECT"},
		{in: "bad key!", err: "key"},
		{in: "berth.dev/runtime-not-ready:", err: "expected NoSchedule, PreferNoSchedule or NoExecute"},
		{in: "berth.dev/runtime-not-ready:noschedule", err: "expected NoSchedule, PreferNoSchedule or NoExecute"},
		{in: ":NoSchedule", err: "key"},
		{in: "bad key!:NoSchedule", err: "key"},
		{in: "a/b/c:NoSchedule", err: "key"},
		{in: "k=bad value:NoSchedule", err: "value"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			st, err := ParseStartupTaint(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseStartupTaint(%q) = %v, %v; want an error containing %q", tc.in, st, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Taint != tc.want || st.MatchValue != tc.value || st.AnyEffect != tc.any {
				t.Errorf("ParseStartupTaint(%q) = %+v (value %v); want %+v (value %v)", tc.in, st.Taint, st.MatchValue, tc.want, tc.value)
			}
			if st.String() != tc.in {
				t.Errorf("String() = %q; want %q", st.String(), tc.in)
			}
		})
	}
	o := Options{NodeName: "n", Platforms: mustPlatforms(t, "kubeadm-qemu-none"), Manifest: "m.yaml" + pin, Prefix: "/opt/berth", StartupTaints: []string{"a:NoSchedule", "k:NoRun"}}
	if _, err := o.Check(); err == nil || !IsUsage(err) || !strings.Contains(err.Error(), "--startup-taint") {
		t.Errorf("Check() with a bad taint = %v; want a usage error naming --startup-taint", err)
	}
}
