package nodereport

import (
	"testing"

	"berth.dev/berth/api/v1alpha1"
)

// TestGPUCCLabel: the node label carries one CC mode for the node's
// CC-capable GPUs, "mixed" or "unknown" when they do not agree or one is
// not known, and is absent on a node without such a GPU.
func TestGPUCCLabel(t *testing.T) {
	gpu := func(cc bool, mode string) v1alpha1.GPUSummary {
		return v1alpha1.GPUSummary{Model: "H100", ConfidentialCapable: cc, CCMode: mode}
	}
	for _, tc := range []struct {
		name string
		gpus []v1alpha1.GPUSummary
		want string
	}{
		{"no gpu", nil, ""},
		{"not capable", []v1alpha1.GPUSummary{gpu(false, "")}, ""},
		{"on", []v1alpha1.GPUSummary{gpu(true, "on"), gpu(true, "on")}, "on"},
		{"ppcie", []v1alpha1.GPUSummary{gpu(true, "ppcie")}, "ppcie"},
		{"mixed", []v1alpha1.GPUSummary{gpu(true, "on"), gpu(true, "off")}, "mixed"},
		{"unknown wins", []v1alpha1.GPUSummary{gpu(true, "on"), gpu(true, "")}, "unknown"},
		{"other gpus ignored", []v1alpha1.GPUSummary{gpu(false, ""), gpu(true, "devtools")}, "devtools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &v1alpha1.Report{}
			r.Facts.GPUs = tc.gpus
			got, ok := Labels(r)[GPUCCLabel]
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("label %s = %q (set %v), want %q", GPUCCLabel, got, ok, tc.want)
			}
		})
	}
}
