package catalog

import (
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

func TestVGPU(t *testing.T) {
	whole := facts.GPU{Address: "0000:41:00.0", Vendor: "nvidia", DeviceID: "2330", VFIOBound: true, IOMMUGroup: ptr(7), GroupIsolated: ptr(true),
		SRIOVTotalVFs: ptr(32), SRIOVNumVFs: ptr(0)}
	sriovVGPU := facts.GPU{Address: "0000:41:00.0", Vendor: "nvidia", DeviceID: "2335", Driver: "nvidia", IOMMUGroup: ptr(7), GroupIsolated: ptr(true),
		SRIOVTotalVFs: ptr(32), SRIOVNumVFs: ptr(16)}
	vf := facts.GPU{Address: "0000:41:00.4", Vendor: "nvidia", DeviceID: "2335", Driver: "nvidia", PhysFn: "0000:41:00.0", IOMMUGroup: ptr(90), GroupIsolated: ptr(true),
		VGPUTypes: []string{"1428: NVIDIA H200X-141C", "1414: NVIDIA H200X-1-18C"}}
	mdev := facts.GPU{Address: "0000:3b:00.0", Vendor: "nvidia", DeviceID: "1db4", Driver: "nvidia", IOMMUGroup: ptr(30), GroupIsolated: ptr(true),
		VGPUTypes: []string{"nvidia-11: GRID M60-0B"}}
	second := whole
	second.Address = "0000:c1:00.0"
	tests := []struct {
		name   string
		gpus   []facts.GPU
		status check.Status
		msg    string
	}{
		{"whole GPU with SR-IOV capability but no VFs", []facts.GPU{whole}, check.Pass, "0000:41:00.0 not set up for vGPU"},
		{"Ampere+ vGPU: VFs enabled", []facts.GPU{sriovVGPU, vf}, check.Fail, "16 of 32 SR-IOV virtual functions enabled"},
		{"pre-Ampere vGPU: mdev types", []facts.GPU{mdev}, check.Fail, "1 vGPU types offered"},
		{"only a VF visible", []facts.GPU{vf}, check.Fail, "only vGPU virtual functions"},
		{"one whole GPU beside a vGPU one", []facts.GPU{mdev, second}, check.Pass, "0000:c1:00.0 can be passed through"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := readyFacts()
			f.GPUs = tt.gpus
			fd, ok := finding(t, f, "kubeadm-qemu-none+gpu", "gpu.vgpu")
			if !ok {
				t.Fatal("gpu.vgpu does not apply to the GPU platform")
			}
			wantFinding(t, fd, tt.status, tt.msg)
		})
	}
	t.Run("not on platforms without a GPU", func(t *testing.T) {
		if _, ok := finding(t, readyFacts(), "kubeadm-qemu-none", "gpu.vgpu"); ok {
			t.Error("gpu.vgpu applies to kubeadm-qemu-none")
		}
	})
	t.Run("unknown GPUs", func(t *testing.T) {
		f := readyFacts()
		f.Unknown = []facts.Missing{{Field: "gpus", Reason: facts.ReasonPermission + ": sys/bus/pci/devices"}}
		fd, _ := finding(t, f, "kubeadm-qemu-none+gpu", "gpu.vgpu")
		if fd.Status == check.Pass {
			t.Errorf("gpu.vgpu passes with gpus unknown: %s", fd.Message)
		}
	})
}
