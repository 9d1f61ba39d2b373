package nodereport

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/testkit/testhosts"
)

// TestWithGPUResources: the report carries the Node's NVIDIA resources,
// and warns when a GPU platform is ready but nothing hands out a GPU for
// a VM.
func TestWithGPUResources(t *testing.T) {
	alloc := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96"), "example.com/fpga": resource.MustParse("1")}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	ready := []v1alpha1.PlatformVerdict{{Name: "kubeadm-qemu-snp", Verdict: v1alpha1.VerdictReady}, {Name: "kubeadm-qemu-snp+gpu", Verdict: v1alpha1.VerdictWarn}}
	blocked := []v1alpha1.PlatformVerdict{{Name: "kubeadm-qemu-snp", Verdict: v1alpha1.VerdictReady}, {Name: "kubeadm-qemu-snp+gpu", Verdict: v1alpha1.VerdictNotReady, FirstBlocker: "gpu.cc.mode"}}
	for _, tc := range []struct {
		name      string
		platforms []v1alpha1.PlatformVerdict
		alloc     corev1.ResourceList
		want      []v1alpha1.GPUResource
		warn      string // "" for no finding
	}{
		{"pgpu", ready, alloc("nvidia.com/pgpu", "8", "nvidia.com/GH100_H100_NVSWITCH", "4"),
			[]v1alpha1.GPUResource{{Name: "nvidia.com/GH100_H100_NVSWITCH", Allocatable: 4}, {Name: "nvidia.com/pgpu", Allocatable: 8}}, ""},
		{"per-model name", ready, alloc("nvidia.com/GH100_H100_PCIE", "1"), []v1alpha1.GPUResource{{Name: "nvidia.com/GH100_H100_PCIE", Allocatable: 1}}, ""},
		{"nothing advertised", ready, alloc(), nil, "kubeadm-qemu-snp+gpu is ready but the Node's allocatable has no passthrough GPU"},
		{"unhealthy devices: allocatable zero", ready, alloc("nvidia.com/pgpu", "0"), []v1alpha1.GPUResource{{Name: "nvidia.com/pgpu", Allocatable: 0}}, "has no passthrough GPU"},
		{"only switches", ready, alloc("nvidia.com/GH100_H100_NVSWITCH", "4"), []v1alpha1.GPUResource{{Name: "nvidia.com/GH100_H100_NVSWITCH", Allocatable: 4}}, "has no passthrough GPU"},
		{"container plugin", ready, alloc("nvidia.com/gpu", "8"), []v1alpha1.GPUResource{{Name: "nvidia.com/gpu", Allocatable: 8}}, "advertises its GPUs as nvidia.com/gpu"},
		{"gpu platform not ready: no warning", blocked, alloc(), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := v1alpha1.Report{NodeName: "n1", Platforms: tc.platforms, Findings: []v1alpha1.Finding{{ID: "gpu.cdi.spec", Status: v1alpha1.FindingWarn, Message: "x"}}}
			r.ContentHash = Hash(r)
			got := WithGPUResources(r, tc.alloc)
			if !reflect.DeepEqual(got.GPUResources, tc.want) {
				t.Errorf("GPUResources = %v, want %v", got.GPUResources, tc.want)
			}
			var f *v1alpha1.Finding
			for i := range got.Findings {
				if got.Findings[i].ID == GPUAllocatableID {
					f = &got.Findings[i]
				}
			}
			switch {
			case tc.warn == "" && f != nil:
				t.Errorf("unexpected finding %+v", *f)
			case tc.warn != "" && (f == nil || f.Status != v1alpha1.FindingWarn || !strings.Contains(f.Message, tc.warn) || !strings.Contains(f.Remedy, "sandboxWorkloads.enabled=true")):
				t.Errorf("finding = %+v, want a warning containing %q", f, tc.warn)
			}
			if got.ContentHash != Hash(got) {
				t.Error("ContentHash not recomputed")
			}
			// Applying it again to its own output changes nothing: the
			// agent applies it to the evaluated report every cycle.
			if again := WithGPUResources(got, tc.alloc); !reflect.DeepEqual(again, got) {
				t.Errorf("not idempotent:\n%+v\n%+v", again, got)
			}
			if len(r.Findings) != 1 {
				t.Error("the input report's findings were changed")
			}
		})
	}
	t.Run("capped", func(t *testing.T) {
		l := corev1.ResourceList{}
		for i := range v1alpha1.MaxGPUResources + 2 {
			l[corev1.ResourceName(fmt.Sprintf("nvidia.com/M%02d", i))] = resource.MustParse("1")
		}
		if got := GPUResources(l); len(got) != v1alpha1.MaxGPUResources || got[0].Name != "nvidia.com/M00" {
			t.Errorf("GPUResources = %v, want the first %d by name", got, v1alpha1.MaxGPUResources)
		}
	})
}

// TestGPUResourcesSizeBudget: on every fixture host with a GPU, the report
// with the worst install status and what an HGX node advertises (the GPUs
// as nvidia.com/pgpu, the NVSwitches under their model name), a per-model
// GPU, or nothing (the gpu.allocatable warning) stays under 8 KiB. Four
// resources of the longest names (74 characters) are counted too: they
// stay within 600 bytes of it.
func TestGPUResourcesSizeBudget(t *testing.T) {
	longest := corev1.ResourceList{}
	for i := range v1alpha1.MaxGPUResources + 4 {
		// The longest name a resource of nvidia.com can have: 63
		// characters after the prefix.
		longest[corev1.ResourceName(fmt.Sprintf("nvidia.com/%02d%s", i, strings.Repeat("X", 61)))] = resource.MustParse("2147483647")
	}
	hgx := corev1.ResourceList{"nvidia.com/pgpu": resource.MustParse("8"), "nvidia.com/GH100_H100_SXM5_NVSWITCH": resource.MustParse("4")}
	model := corev1.ResourceList{"nvidia.com/GH100_H100_PCIE": resource.MustParse("1")}
	for _, h := range testhosts.Names(t) {
		r := fixtureReport(t, h)
		if len(r.Facts.GPUs) == 0 {
			continue
		}
		t.Run(h, func(t *testing.T) {
			for _, tc := range []struct {
				alloc corev1.ResourceList
				limit int
			}{{hgx, 8 << 10}, {model, 8 << 10}, {nil, 8 << 10}, {longest, 8<<10 + 600}} {
				got := WithGPUResources(WithInstall(r, new(worstInstall())), tc.alloc)
				b, err := json.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) > tc.limit {
					t.Errorf("report with %d GPU resources and %d findings is %d bytes, want at most %d", len(got.GPUResources), len(got.Findings), len(b), tc.limit)
				}
				t.Logf("%s: %d bytes with %d GPU resources, %d findings", h, len(b), len(got.GPUResources), len(got.Findings))
			}
		})
	}
}
