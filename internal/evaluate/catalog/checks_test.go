package catalog

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

func ptr[T any](v T) *T { return &v }

// readyFacts is a bare-metal Genoa host on which every check of every
// kubeadm SNP/plain platform passes.
func readyFacts() *facts.Facts {
	node := facts.DeviceNode{Exists: true, Mode: "crw-rw----", Accessible: ptr(true)}
	return &facts.Facts{
		SchemaVersion: facts.SchemaVersion, Live: true, CollectedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		CPU: facts.CPU{Vendor: "amd", VendorID: "AuthenticAMD", ProductLine: "genoa",
			Flags: []string{"sev", "sev_es", "sev_snp", "sme", "svm"}},
		Virt: facts.Virt{Guest: ptr(false)},
		Kernel: facts.Kernel{Release: "6.14.0-29-generic", Cmdline: "ro quiet kvm_amd.sev_snp=1",
			Modules: map[string]facts.Module{"kvm": {Loaded: true}, "kvm_amd": {Loaded: true}},
			Config:  map[string]string{"VIRTIO_FS": "m", "FUSE_FS": "y"}},
		Devices: facts.Devices{Nodes: map[string]facts.DeviceNode{"dev/kvm": node, "dev/vhost-vsock": node, "dev/vhost-net": node, "dev/net/tun": node, "dev/sev": node},
			KVM: &facts.KVMProbe{Opened: true, APIVersion: 12, CreateVM: true}},
		IOMMU: facts.IOMMU{ACPITable: "IVRS", Groups: 40},
		GPUs: []facts.GPU{{Address: "0000:41:00.0", Vendor: "nvidia", DeviceID: "2330", ConfidentialCapable: true, VFIOBound: true, IOMMUGroup: ptr(7), GroupIsolated: ptr(true),
			CCMode: "on", PPCIeMode: "off", VBIOS: "96.00.5e.00.01"}},
		CDISpecs: []facts.CDISpec{{Path: "/var/run/cdi/nvidia.com-pgpu.yaml", Kind: "nvidia.com/pgpu"}},
		Memory:   facts.Memory{TotalKiB: 512 << 20, AvailableKiB: 400 << 20},
		Storage: facts.Storage{Filesystems: []facts.Filesystem{
			{Path: "opt/kata", Measured: "opt", SizeBytes: 400 << 30, FreeBytes: 300 << 30, Device: "nvme0n1"},
			{Path: "opt/berth", Measured: "opt", SizeBytes: 400 << 30, FreeBytes: 300 << 30, Device: "nvme0n1"},
			{Path: "var/lib/containerd", Measured: "var/lib/containerd", SizeBytes: 400 << 30, FreeBytes: 300 << 30, Device: "nvme0n1"}},
			BlockDevices: []facts.BlockDevice{{Name: "nvme0n1", Transport: "nvme", SizeBytes: 400 << 30},
				{Name: "dm-2", Transport: "dm", DMName: "containerd-pool", Slaves: []string{"nvme0n1"}}}},
		Cgroups: facts.Cgroups{Version: 2, Controllers: []string{"cpu", "memory", "pids"},
			MiscCapacity: map[string]int64{"sev": 410, "sev_es": 99, "tdx": 63}},
		Limits: facts.Limits{InotifyMaxUserInstances: ptr(8192)},
		TEE: facts.TEE{SNP: facts.SNP{KVMSEV: ptr(true), KVMSEVES: ptr(true), KVMSEVSNP: ptr(true), FirmwareVersion: "1.55",
			RMPReserved: ptr(true), SNPASIDs: &facts.Range{Min: 1, Max: 99}, IOMMUSNP: ptr(true)}},
		Runtimes: facts.Runtimes{Containerd: &facts.ContainerRuntime{Binary: "/usr/bin/containerd", Version: "2.1.4",
			ConfigPath: "etc/containerd/config.toml", ConfigExists: true, ConfigVersion: 3,
			Snapshotters: []string{"overlayfs", "nydus", "devmapper", "blockfile", "erofs"}, DevmapperPool: "containerd-pool", SocketExists: true, Socket: "run/containerd/containerd.sock"}},
		Distribution: facts.Distribution{Name: "kubeadm", PodResourcesSocket: "/var/lib/kubelet/pod-resources/kubelet.sock", PodResourcesPresent: true},
		Kubelet:      facts.Kubelet{RuntimeRequestTimeout: "10m0s", RuntimeRequestTimeoutSource: "var/lib/kubelet/config.yaml:31 runtimeRequestTimeout"},
		Binaries: []facts.Binary{{Name: "qemu", Path: "/opt/kata/bin/qemu-system-x86_64", Version: "10.1.0"},
			{Name: "cloud-hypervisor", Path: "/opt/kata/bin/cloud-hypervisor", Version: "48.0"},
			{Name: "firecracker", Path: "/opt/kata/bin/firecracker", Version: "1.12.0"},
			{Name: "virtiofsd", Path: "/opt/kata/libexec/virtiofsd", Version: "1.13.0"}},
		QEMUProbe: &facts.QEMUProbe{Binary: "/opt/kata/bin/qemu-system-x86_64", Ran: true, Version: "10.1.0", KVMPresent: true, KVMEnabled: true,
			ConfidentialTypes: []string{"sev-guest", "sev-snp-guest", "tdx-guest"}, SEVCapabilities: true},
	}
}

func kubeadmPlatforms(t testing.TB) []platform.Platform {
	var out []platform.Platform
	for _, p := range platform.All() {
		if p.Distribution() == platform.Kubeadm {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("platform.All has no kubeadm platform")
	}
	return out
}

func evaluator(t testing.TB, f *facts.Facts) *check.Evaluator {
	t.Helper()
	e, err := check.NewEvaluator(For(f))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func findingOf(t *testing.T, v check.Verdict, id string) check.Finding {
	t.Helper()
	for _, fd := range v.Findings {
		if fd.ID == id {
			return fd
		}
	}
	t.Fatalf("%s: no finding %s", v.Platform, id)
	return check.Finding{}
}

func TestCatalogueValid(t *testing.T) {
	e := evaluator(t, readyFacts())
	for _, c := range e.Checks() {
		if len(c.Title) > 55 {
			t.Errorf("%s: title %q too long for an 80-column line", c.ID, c.Title)
		}
	}
}

// TestReadyHost: on the ready SNP host every SNP/plain QEMU platform is ready.
func TestReadyHost(t *testing.T) {
	f := readyFacts()
	for _, name := range []string{"kubeadm-qemu-none", "kubeadm-qemu-snp", "kubeadm-qemu-snp-genoa", "kubeadm-qemu-snp-genoa+gpu", "kubeadm-cloud-hypervisor-none", "kubeadm-firecracker-none"} {
		p, err := platform.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		v := evaluator(t, f).Evaluate(f, []platform.Platform{p}, check.Options{})[0]
		if v.Status != check.Ready {
			for _, fd := range v.Findings {
				if fd.Status != check.Pass {
					t.Logf("%s: %s %s: %s", name, fd.Status, fd.ID, fd.Message)
				}
			}
			t.Errorf("%s: %s, want ready", name, v.Status)
		}
	}
}

// TestUnknownEvidenceNeverPasses is the property: for every check and every
// field it declares, marking that field unknown on otherwise ready facts
// never yields a pass on any platform the check applies to.
func TestUnknownEvidenceNeverPasses(t *testing.T) {
	ps := kubeadmPlatforms(t)
	for _, c := range All() {
		for _, field := range c.Reads {
			assertNoPass(t, c.ID, field, ps)
		}
		if c.ReadsFor != nil {
			for _, p := range ps {
				for _, field := range c.ReadsFor(p) {
					assertNoPass(t, c.ID, field, []platform.Platform{p})
				}
			}
		}
	}
}

func assertNoPass(t *testing.T, id, field string, ps []platform.Platform) {
	t.Helper()
	f := readyFacts()
	f.Unknown = []facts.Missing{{Field: field, Reason: facts.ReasonOffline}}
	for _, v := range evaluator(t, f).Evaluate(f, ps, check.Options{}) {
		for _, fd := range v.Findings {
			if fd.ID == id && fd.Status == check.Pass {
				t.Errorf("%s passes on %s with %s unknown", id, v.Platform, field)
			}
		}
	}
}

func TestAreas(t *testing.T) {
	tests := []struct {
		name     string
		platform string
		mutate   func(f *facts.Facts)
		id       string
		want     check.Status
		contains string
	}{
		{"no hw virt in a firecracker guest", "kubeadm-qemu-none", func(f *facts.Facts) {
			f.CPU.Flags, f.Virt.Guest, f.Virt.Hypervisor, f.Devices.KVM = []string{"hypervisor"}, ptr(true), "firecracker", nil
		}, "virt.hardware", check.Fail, "Firecracker guest without nested virtualisation"},
		{"no hw virt on bare metal", "kubeadm-qemu-none", func(f *facts.Facts) { f.CPU.Flags, f.Devices.KVM = nil, nil }, "virt.hardware", check.Fail, "BIOS"},
		{"software KVM backend", "kubeadm-qemu-none", func(f *facts.Facts) { f.CPU.Flags, f.Virt.Guest = nil, ptr(true) }, "virt.hardware", check.Fail, "software backend"},
		{"nested guest is a warning", "kubeadm-qemu-none", func(f *facts.Facts) { f.Virt.Guest = ptr(true) }, "virt.nested", check.Warn, "nested"},
		{"TEE needs bare metal", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Virt.Guest = ptr(true) }, "virt.guest.tee", check.Fail, "bare metal"},
		{"kvm busy", "kubeadm-qemu-none", func(f *facts.Facts) { f.Devices.KVM = &facts.KVMProbe{Opened: true, APIVersion: 12, Errno: "EBUSY"} }, "kvm.device.free", check.Fail, "EBUSY"},
		{"kvm api", "kubeadm-qemu-none", func(f *facts.Facts) { f.Devices.KVM.APIVersion = 11 }, "kvm.device.usable", check.Fail, "API version 11"},
		{"kvm not accessible", "kubeadm-qemu-none", func(f *facts.Facts) {
			f.Devices.Nodes["dev/kvm"] = facts.DeviceNode{Exists: true, Accessible: ptr(false)}
		}, "kvm.device.accessible", check.Fail, "read-write"},
		{"no kvm module", "kubeadm-qemu-none", func(f *facts.Facts) { delete(f.Kernel.Modules, "kvm_amd") }, "kvm.module", check.Fail, "kvm_amd"},
		{"vhost-vsock via module", "kubeadm-qemu-none", func(f *facts.Facts) {
			delete(f.Devices.Nodes, "dev/vhost-vsock")
			f.Kernel.Modules["vhost_vsock"] = facts.Module{Loaded: true}
		}, "devices.vhost-vsock", check.Pass, "loaded"},
		{"no tun", "kubeadm-qemu-none", func(f *facts.Facts) { delete(f.Devices.Nodes, "dev/net/tun") }, "devices.tun", check.Fail, "tun"},
		{"no vhost-net is a warning", "kubeadm-qemu-none", func(f *facts.Facts) { delete(f.Devices.Nodes, "dev/vhost-net") }, "devices.vhost-net", check.Warn, "vhost_net"},
		{"cmdline typo", "kubeadm-qemu-none", func(f *facts.Facts) { f.Kernel.Cmdline = "kvm.sev_es=1 kvm.tdx=1 kvm_amd.snp=1" }, "cmdline.params", check.Warn, "kvm_amd.sev_es"},
		{"cmdline dash form is fine", "kubeadm-qemu-none", func(f *facts.Facts) { f.Kernel.Cmdline = "kvm-amd.sev_snp=1" }, "cmdline.params", check.Pass, ""},
		{"cgroup v1", "kubeadm-qemu-none", func(f *facts.Facts) { f.Cgroups.Version = 1 }, "cgroups.version", check.Warn, "v1"},
		{"memory controller missing", "kubeadm-qemu-none", func(f *facts.Facts) { f.Cgroups.Controllers = []string{"cpu", "pids"} }, "cgroups.controllers", check.Fail, "memory"},
		{"too little memory for gpu", "kubeadm-qemu-none+gpu", func(f *facts.Facts) { f.Memory.TotalKiB, f.Memory.AvailableKiB = 16<<20, 15<<20 }, "memory.sandbox", check.Fail, "18432 MiB"},
		{"hugepages exhausted", "kubeadm-qemu-none", func(f *facts.Facts) { f.Memory.HugePages = []facts.HugePage{{SizeKiB: 2048, Total: 512}} }, "memory.hugepages", check.Warn, "in use"},
		{"inotify low", "kubeadm-qemu-none", func(f *facts.Facts) { f.Limits.InotifyMaxUserInstances = ptr(128) }, "limits.inotify", check.Warn, "128"},
		{"iommu off in kernel", "kubeadm-qemu-none+gpu", func(f *facts.Facts) { f.IOMMU.Groups = 0 }, "iommu.enabled", check.Fail, "amd_iommu=on"},
		{"gpu on nvidia driver", "kubeadm-qemu-none+gpu", func(f *facts.Facts) { f.GPUs[0].VFIOBound, f.GPUs[0].Driver = false, "nvidia" }, "gpu.vfio", check.Fail, "driverctl"},
		{"gpu group shared", "kubeadm-qemu-none+gpu", func(f *facts.Facts) {
			f.GPUs[0].GroupIsolated, f.GPUs[0].GroupMembers = ptr(false), []string{"0000:41:00.1"}
		}, "gpu.iommu.group", check.Fail, "0000:41:00.1"},
		{"gpu not confidential", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.GPUs[0].ConfidentialCapable = false }, "gpu.confidential", check.Fail, "Hopper"},
		{"gpu cc off", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.GPUs[0].CCMode = "off" }, "gpu.cc.mode", check.Fail, "CC mode off on 0000:41:00.0: set it with NVIDIA's tool"},
		{"gpu cc devtools", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.GPUs[0].CCMode = "devtools" }, "gpu.cc.mode", check.Warn, "devtools on 0000:41:00.0"},
		{"gpu cc unknown", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.GPUs[0].CCMode = ""
			f.Unknown = append(f.Unknown, facts.Missing{Field: "gpus[0000:41:00.0].ccMode", Reason: "offline root: no recorded BAR0 probe"})
		}, "gpu.cc.mode", check.Unknown, "no recorded BAR0 probe"},
		{"gpu ppcie counts as cc", "kubeadm-qemu-tdx+gpu", func(f *facts.Facts) { f.GPUs[0].CCMode, f.GPUs[0].PPCIeMode = "off", "on" }, "gpu.cc.mode", check.Pass, "(PPCIe)"},
		{"nvswitch ppcie mixed", "kubeadm-qemu-tdx+gpu", func(f *facts.Facts) {
			f.GPUs[0].CCMode, f.GPUs[0].PPCIeMode = "off", "on"
			f.NVSwitches = []facts.NVSwitch{{Address: "0000:05:00.0", DeviceID: "22a3", Generation: "ls10", PPCIeMode: "off"}}
		}, "gpu.cc.ppcie", check.Fail, "off for NVSwitch 0000:05:00.0"},
		{"nvswitch ppcie off", "kubeadm-qemu-tdx+gpu", func(f *facts.Facts) {
			f.NVSwitches = []facts.NVSwitch{{Address: "0000:05:00.0", DeviceID: "22a3", Generation: "ls10", PPCIeMode: "off"}}
		}, "gpu.cc.ppcie", check.Warn, "not several GPUs to one VM"},
		{"nvswitch ppcie on", "kubeadm-qemu-tdx+gpu", func(f *facts.Facts) {
			f.GPUs[0].CCMode, f.GPUs[0].PPCIeMode = "off", "on"
			f.NVSwitches = []facts.NVSwitch{{Address: "0000:05:00.0", DeviceID: "22a3", Generation: "ls10", PPCIeMode: "on"}}
		}, "gpu.cc.ppcie", check.Pass, "PPCIe on for 1 GPUs and 1 NVSwitches"},
		{"vbios old", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.GPUs[0].VBIOS = "96.00.30.00.01" }, "gpu.cc.vbios", check.Fail, "96.00.30.00.01 < 96.00.5e.00.00"},
		{"vbios unknown on vfio", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.GPUs[0].VBIOS = ""
			f.Unknown = append(f.Unknown, facts.Missing{Field: "gpus[0000:41:00.0].vbios", Reason: "missing: only the nvidia driver reports the VBIOS version"})
		}, "gpu.cc.vbios", check.Unknown, "only the nvidia driver"},
		{"vbios no published minimum", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.GPUs[0].DeviceID = "2335" }, "gpu.cc.vbios", check.Unknown, "no minimum VBIOS for 10de:2335"},
		{"no pod-resources socket", "kubeadm-qemu-none+gpu", func(f *facts.Facts) { f.Distribution.PodResourcesPresent = false }, "gpu.podresources", check.Fail, "no kubelet pod-resources socket at /var/lib/kubelet/pod-resources/kubelet.sock"},
		{"no distribution: pod-resources unknown", "kubeadm-qemu-none+gpu", func(f *facts.Facts) { f.Distribution = facts.Distribution{} }, "gpu.podresources", check.Unknown, "no Kubernetes distribution"},
		{"k0s: pod-resources socket under k0s's kubelet root", "k0s-qemu-none+gpu", func(f *facts.Facts) {
			f.Distribution = facts.Distribution{Name: "k0s", PodResourcesSocket: platform.K0s.PodResourcesSocket()}
		}, "gpu.podresources", check.Fail, "no kubelet pod-resources socket at /var/lib/k0s/kubelet/pod-resources/kubelet.sock (k0s's kubelet root)"},
		{"kubelet timeout set high enough", "kubeadm-qemu-snp", func(f *facts.Facts) {}, "distribution.kubelet.timeout", check.Pass, "10m0s >= 10m0s"},
		{"kubelet timeout at the default under guest pull", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Kubelet = facts.Kubelet{} },
			"distribution.kubelet.timeout", check.Warn, "2m0s (the default) is under the 600 s kata-deploy suggests"},
		{"kubelet timeout default: kubeadm remedy", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Kubelet = facts.Kubelet{} },
			"distribution.kubelet.timeout", check.Warn, "runtimeRequestTimeout: 10m in /var/lib/kubelet/config.yaml"},
		{"kubelet timeout low on k3s names the file that set it", "k3s-qemu-snp", func(f *facts.Facts) {
			f.Distribution.Name = "k3s"
			f.Kubelet = facts.Kubelet{RuntimeRequestTimeout: "5m0s", RuntimeRequestTimeoutSource: "etc/rancher/k3s/config.yaml:4 kubelet-arg runtime-request-timeout"}
		}, "distribution.kubelet.timeout", check.Warn, "raise it to 10m or more at /etc/rancher/k3s/config.yaml:4, or"},
		{"kubelet timeout k3s remedy", "k3s-qemu-snp", func(f *facts.Facts) { f.Distribution.Name, f.Kubelet = "k3s", facts.Kubelet{} },
			"distribution.kubelet.timeout", check.Warn, "kubelet-arg in /etc/rancher/k3s/config.yaml"},
		{"kubelet timeout forced guest pull on overlayfs (tdx)", "kubeadm-qemu-tdx", func(f *facts.Facts) {
			f.Kubelet = facts.Kubelet{RuntimeRequestTimeout: "2m30s", RuntimeRequestTimeoutSource: "etc/default/kubelet:1 --runtime-request-timeout"}
		},
			"distribution.kubelet.timeout", check.Warn, "2m30s is under"},
		{"kubelet timeout unknown", "kubeadm-qemu-snp", func(f *facts.Facts) {
			f.Kubelet = facts.Kubelet{}
			f.Unknown = append(f.Unknown, facts.Missing{Field: "kubelet.runtimeRequestTimeout", Reason: "permission denied: var/lib/kubelet/config.yaml"})
		}, "distribution.kubelet.timeout", check.Unknown, ""},
		{"cdi on by default on containerd 2", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {}, "gpu.cdi", check.Pass, "CDI on by default"},
		{"cdi off on containerd 2", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.Runtimes.Containerd.CDIEnabled = ptr(false) }, "gpu.cdi", check.Warn, "sets enable_cdi = false"},
		{"cdi unset on containerd 1.7", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.Runtimes.Containerd.Version = "1.7.27" }, "gpu.cdi", check.Warn, "leaves CDI off unless enable_cdi = true"},
		{"cdi on on containerd 1.7", "kubeadm-qemu-tdx+gpu", func(f *facts.Facts) {
			f.Runtimes.Containerd.Version, f.Runtimes.Containerd.CDIEnabled = "1.7.27", ptr(true)
		}, "gpu.cdi", check.Pass, "enable_cdi = true"},
		{"no cdi on containerd 1.6", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.Runtimes.Containerd.Version = "1.6.20" }, "gpu.cdi", check.Warn, "no CDI support"},
		{"cdi unknown version", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.Runtimes.Containerd.Version = "" }, "gpu.cdi", check.Unknown, "version not known"},
		{"cdi unknown config", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.Runtimes.Containerd.Version = "1.7.27"
			f.Unknown = append(f.Unknown, facts.Missing{Field: "runtimes.containerd.cdiEnabled", Reason: "unparseable: etc/containerd/config.toml:3:1: x"})
		}, "gpu.cdi", check.Unknown, "cdiEnabled unknown"},
		{"cdi spec for pgpu", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {}, "gpu.cdi.spec", check.Pass, "nvidia.com/pgpu (/var/run/cdi/nvidia.com-pgpu.yaml)"},
		{"cdi spec per model", "kubeadm-qemu-none+gpu", func(f *facts.Facts) { f.CDISpecs[0].Kind = "nvidia.com/GH100_H100_PCIE" }, "gpu.cdi.spec", check.Pass, "nvidia.com/GH100_H100_PCIE"},
		{"no cdi spec", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) { f.CDISpecs = nil }, "gpu.cdi.spec", check.Warn, "no CDI specification for NVIDIA's passthrough GPUs"},
		{"only nvidia-ctk's cdi spec", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.CDISpecs = []facts.CDISpec{{Path: "/etc/cdi/nvidia.yaml", Kind: "nvidia.com/gpu"}}
		}, "gpu.cdi.spec", check.Warn, "only nvidia.com/gpu (/etc/cdi/nvidia.yaml), nvidia-ctk's"},
		{"unreadable cdi spec", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.CDISpecs = []facts.CDISpec{{Path: "/var/run/cdi/nvidia.com-pgpu.yaml", Error: "unparseable: /var/run/cdi/nvidia.com-pgpu.yaml: no top-level kind"}}
		}, "gpu.cdi.spec", check.Warn, "unreadable: unparseable: /var/run/cdi/nvidia.com-pgpu.yaml"},
		{"cdi spec without nvswitch on a ppcie board", "kubeadm-qemu-tdx+gpu", func(f *facts.Facts) {
			f.NVSwitches = []facts.NVSwitch{{Address: "0000:05:00.0", DeviceID: "22a3", Generation: "ls10", PPCIeMode: "on"}}
		}, "gpu.cdi.spec", check.Warn, "no nvidia.com/nvswitch"},
		{"cdi specs unknown", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.CDISpecs = nil
			f.Unknown = append(f.Unknown, facts.Missing{Field: "cdiSpecs", Reason: "permission denied: var/run/cdi"})
		}, "gpu.cdi.spec", check.Unknown, "cdiSpecs unknown"},
		{"gpu guest: handler not configured", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {}, "gpu.guest.image", check.Pass, "not configured yet"},
		{"gpu guest: nvidia confidential", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.Runtimes.Containerd.Handlers = []facts.Handler{{Name: "kata-qemu-nvidia-gpu-snp", ConfigPath: "/opt/kata/c.toml", Kata: &facts.KataGuest{Hypervisor: "qemu",
				Kernel: "/opt/kata/share/kata-containers/vmlinuz-nvidia-gpu.container", Image: "/opt/kata/share/kata-containers/kata-containers-nvidia-gpu-confidential.img"}}}
		}, "gpu.guest.image", check.Pass, "boots vmlinuz-nvidia-gpu.container and kata-containers-nvidia-gpu-confidential.img"},
		{"gpu guest: plain confidential image", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.Runtimes.Containerd.Handlers = []facts.Handler{{Name: "kata-qemu-nvidia-gpu-snp", ConfigPath: "/opt/kata/c.toml", Kata: &facts.KataGuest{Hypervisor: "qemu",
				Kernel: "/opt/kata/share/kata-containers/vmlinuz-confidential.container", Image: "/opt/kata/share/kata-containers/kata-containers-confidential.img"}}}
		}, "gpu.guest.image", check.Fail, "without NVIDIA's driver: kernel vmlinuz-confidential.container, image kata-containers-confidential.img (from /opt/kata/c.toml)"},
		{"gpu guest: non-confidential nvidia image on snp", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.Runtimes.Containerd.Handlers = []facts.Handler{{Name: "kata-qemu-nvidia-gpu-snp", ConfigPath: "/opt/kata/c.toml", Kata: &facts.KataGuest{Hypervisor: "qemu",
				Kernel: "/opt/kata/share/kata-containers/vmlinuz-nvidia-gpu.container", Image: "/opt/kata/share/kata-containers/kata-containers-nvidia-gpu.img"}}}
		}, "gpu.guest.image", check.Warn, "boots image kata-containers-nvidia-gpu.img, not vmlinuz-nvidia-gpu.container and kata-containers-nvidia-gpu-confidential.img (Kata 4.1's qemu-nvidia-gpu-snp)"},
		{"gpu guest: unreadable configuration", "kubeadm-qemu-snp+gpu", func(f *facts.Facts) {
			f.Runtimes.Containerd.Handlers = []facts.Handler{{Name: "kata-qemu-nvidia-gpu-snp", ConfigPath: "/opt/kata/c.toml", Kata: &facts.KataGuest{Error: "missing: /opt/kata/c.toml"}}}
		}, "gpu.guest.image", check.Unknown, "missing: /opt/kata/c.toml"},
		{"snp on rome", "kubeadm-qemu-snp", func(f *facts.Facts) { f.CPU.ProductLine = "rome" }, "snp.cpu.generation", check.Fail, "Milan"},
		{"snp pinned to another line", "kubeadm-qemu-snp-milan", func(f *facts.Facts) {}, "snp.cpu.generation", check.Fail, "pinned to milan"},
		{"snp off in bios", "kubeadm-qemu-snp", func(f *facts.Facts) { f.CPU.Flags = []string{"svm", "sme"} }, "snp.bios.enabled", check.Fail, "BIOS"},
		{"rmp not reserved", "kubeadm-qemu-snp", func(f *facts.Facts) { f.TEE.SNP.RMPReserved = ptr(false) }, "snp.bios.rmp", check.Fail, "RMP"},
		{"old firmware", "kubeadm-qemu-snp", func(f *facts.Facts) { f.TEE.SNP.FirmwareVersion = "1.49" }, "snp.firmware.version", check.Fail, "1.51"},
		{"sev_snp off", "kubeadm-qemu-snp", func(f *facts.Facts) { f.TEE.SNP.KVMSEVSNP = ptr(false) }, "snp.kvm.params", check.Fail, "kvm_amd.sev_snp"},
		{"no snp asids", "kubeadm-qemu-snp", func(f *facts.Facts) { f.TEE.SNP.SNPASIDs = &facts.Range{Min: 1, Max: 0} }, "snp.asids", check.Fail, "ASIDs"},
		{"iommu snp off", "kubeadm-qemu-snp", func(f *facts.Facts) { f.TEE.SNP.IOMMUSNP = ptr(false) }, "snp.iommu", check.Fail, "IOMMU"},
		{"no /dev/sev", "kubeadm-qemu-snp", func(f *facts.Facts) { delete(f.Devices.Nodes, "dev/sev") }, "snp.device", check.Fail, "/dev/sev"},
		{"vendor snp kernel", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Kernel.Release = "6.8.0-1014-azure" }, "snp.kernel.version", check.Warn, "vendor kernel"},
		{"old kernel no snp", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Kernel.Release, f.TEE.SNP.KVMSEVSNP = "6.8.0-60-generic", ptr(false) }, "snp.kernel.version", check.Fail, "6.11"},
		{"old qemu for snp", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Binaries[0].Version = "8.2.2" }, "hypervisor.version", check.Fail, "9.1"},
		{"vendor qemu for snp", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Binaries[0].Version, f.Binaries[0].Vendor = "8.0.0", "AMDESE snp" }, "hypervisor.version", check.Warn, "vendor build"},
		{"qemu without snp type", "kubeadm-qemu-snp", func(f *facts.Facts) { f.QEMUProbe.ConfidentialTypes = []string{"sev-guest"} }, "hypervisor.functional", check.Fail, "sev-snp-guest"},
		{"qemu not installed yet", "kubeadm-qemu-none", func(f *facts.Facts) { f.QEMUProbe = nil }, "hypervisor.functional", check.Skip, "not installed yet"},
		{"qemu not probed", "kubeadm-qemu-none", func(f *facts.Facts) {
			f.QEMUProbe = nil
			f.Unknown = append(f.Unknown, facts.Missing{Field: "qemuProbe", Reason: facts.ReasonNotRun + ": disabled (--no-probe)"})
		}, "hypervisor.functional", check.Unknown, "qemuProbe unknown"},
		{"no hypervisor yet", "kubeadm-cloud-hypervisor-none", func(f *facts.Facts) { f.Binaries = f.Binaries[:1] }, "hypervisor.binary", check.Warn, "not installed"},
		{"no virtiofsd yet", "kubeadm-qemu-none", func(f *facts.Facts) { f.Binaries = f.Binaries[:3] }, "sharedfs.virtiofs.daemon", check.Warn, "virtiofsd"},
		{"no containerd", "kubeadm-qemu-none", func(f *facts.Facts) { f.Runtimes.Containerd = nil }, "runtime.present", check.Fail, "containerd"},
		{"old containerd", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Runtimes.Containerd.Version = "1.6.28" }, "runtime.version", check.Fail, "1.7"},
		{"config error", "kubeadm-qemu-none", func(f *facts.Facts) { f.Runtimes.Containerd.ConfigError = "line 3, column 1: expected '='" }, "runtime.config.parse", check.Fail, "line 3"},
		{"handler not yet", "kubeadm-qemu-none", func(f *facts.Facts) {}, "runtime.handler", check.Pass, "not configured yet"},
		{"handler wrong snapshotter", "kubeadm-qemu-snp", func(f *facts.Facts) {
			f.Runtimes.Containerd.Handlers = []facts.Handler{{Name: "kata-qemu-snp", RuntimeType: "io.containerd.kata-qemu-snp.v2"}}
		}, "runtime.handler", check.Warn, "nydus"},
		{"no devmapper for firecracker", "kubeadm-firecracker-none", func(f *facts.Facts) { f.Runtimes.Containerd.Snapshotters = []string{"overlayfs"} }, "snapshotter.available", check.Fail, "devmapper"},
		{"nydus installed later", "kubeadm-qemu-snp", func(f *facts.Facts) { f.Runtimes.Containerd.Snapshotters = nil }, "snapshotter.available", check.Warn, "nydus"},
		// Confidential AKS (kata-cc): AKS's tardev-snapshotter shows as
		// the containerd proxy plugin "tardev"; berth does not install it.
		{"tardev on a KataCcIsolation pool", "kata-cc-isolation", func(f *facts.Facts) {
			f.Runtimes.Containerd.Snapshotters = []string{"tardev", "overlayfs"}
		}, "snapshotter.available", check.Pass, "tardev configured"},
		{"no tardev elsewhere", "kata-cc-isolation", func(f *facts.Facts) { f.Runtimes.Containerd.Snapshotters = []string{"overlayfs"} },
			"snapshotter.available", check.Fail, "KataCcIsolation"},
		// The hypervisor judged is the one the rendered configuration
		// runs: the build under an install prefix, not the distribution's.
		{"prefix qemu wins over the distribution's", "kubeadm-qemu-snp", func(f *facts.Facts) {
			f.Binaries = []facts.Binary{
				{Name: "qemu", Path: "/usr/bin/qemu-system-x86_64", Version: "8.2.2", Vendor: "Debian 1:8.2.2+ds-0ubuntu1"},
				{Name: "qemu", Path: "/opt/kata/bin/qemu-system-x86_64", Version: "9.2.0", Vendor: "kata-static"},
			}
		}, "hypervisor.version", check.Pass, "9.2.0"},
		{"stratovirt found", "kubeadm-stratovirt-none", func(f *facts.Facts) {
			f.Binaries = append(f.Binaries, facts.Binary{Name: "stratovirt", Path: "/opt/kata/bin/stratovirt", Version: "2.4.0"})
		}, "hypervisor.binary", check.Pass, "/opt/kata/bin/stratovirt 2.4.0"},
		{"stratovirt not yet", "kubeadm-stratovirt-none", func(f *facts.Facts) {}, "hypervisor.binary", check.Warn, "stratovirt is not installed yet"},
		{"bergamo certifies as genoa", "kubeadm-qemu-snp-genoa", func(f *facts.Facts) { f.CPU.ProductLine = "bergamo" }, "snp.cpu.generation", check.Pass, "bergamo"},
		{"milan is not genoa", "kubeadm-qemu-snp-genoa", func(f *facts.Facts) { f.CPU.ProductLine = "milan" }, "snp.cpu.generation", check.Fail, "milan variant"},
		{"distribution mismatch", "kubeadm-qemu-none", func(f *facts.Facts) { f.Distribution.Name = "k3s" }, "distribution.match", check.Fail, "k3s"},
		{"no distribution: kubeadm", "kubeadm-qemu-none", func(f *facts.Facts) { f.Distribution.Name = "" }, "distribution.match", check.Pass, "kubeadm"},
		{"plugin error", "kubeadm-qemu-none", func(f *facts.Facts) {
			f.Plugins.Errors = []facts.PluginError{{Name: "site", Message: "bad line 3"}}
		}, "plugin.site", check.Warn, "bad line 3"},
		{"plugin finding", "kubeadm-qemu-none", func(f *facts.Facts) {
			f.Plugins.Findings = []facts.PluginFinding{{Plugin: "attest", ID: "attest", Status: "fail", Message: "no PCCS"}}
		}, "plugin.attest", check.Fail, "no PCCS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := readyFacts()
			tt.mutate(f)
			p, err := platform.Parse(tt.platform)
			if err != nil {
				t.Fatal(err)
			}
			v := evaluator(t, f).Evaluate(f, []platform.Platform{p}, check.Options{})[0]
			fd := findingOf(t, v, tt.id)
			if fd.Status != tt.want || !strings.Contains(fd.Message+" "+fd.Remedy, tt.contains) {
				t.Errorf("%s on %s: %s %q, want %s containing %q", tt.id, tt.platform, fd.Status, fd.Message, tt.want, tt.contains)
			}
			if fd.Status == check.Fail && fd.Remedy == "" {
				t.Errorf("%s fails without a remedy", tt.id)
			}
		})
	}
}

// readyTDXFacts is readyFacts on an Emerald Rapids host on which every
// check of the kubeadm TDX platform passes.
func readyTDXFacts() *facts.Facts {
	f := readyFacts()
	f.CPU = facts.CPU{Vendor: "intel", VendorID: "GenuineIntel", ProductLine: "emerald-rapids", Flags: []string{"vmx"}}
	f.Kernel.Modules = map[string]facts.Module{"kvm": {Loaded: true}, "kvm_intel": {Loaded: true}}
	f.Kernel.Release = "6.16.3"
	f.TEE = facts.TEE{TDX: facts.TDX{KVMTDX: ptr(true), BIOSKeyIDs: &facts.Range{Min: 64, Max: 128}, ModuleInitialized: ptr(true), ModuleVersion: "1.5.06"},
		SGX: facts.SGX{Enclave: true, Provision: true}}
	return f
}

func TestTDX(t *testing.T) {
	ready := readyTDXFacts
	p, _ := platform.Parse("kubeadm-qemu-tdx")
	if v := evaluator(t, ready()).Evaluate(ready(), []platform.Platform{p}, check.Options{})[0]; v.Status != check.Ready {
		t.Fatalf("ready TDX host: %s blocked by %s", v.Status, v.BlockedBy)
	}
	tests := []struct {
		name   string
		mutate func(f *facts.Facts)
		id     string
		want   check.Status
	}{
		{"bios off", func(f *facts.Facts) { f.TEE.TDX.BIOSKeyIDs, f.TEE.TDX.ModuleInitialized = nil, nil }, "tdx.bios.keyids", check.Fail},
		{"hibernation", func(f *facts.Facts) {
			f.TEE.TDX.ModuleInitialized, f.TEE.TDX.ModuleError = ptr(false), "initialization failed: Hibernation support is enabled"
		}, "tdx.hibernation", check.Fail},
		{"module old", func(f *facts.Facts) {
			f.TEE.TDX.ModuleInitialized, f.TEE.TDX.ModuleError = ptr(false), "module initialization failed (-5)"
		}, "tdx.module", check.Fail},
		{"kvm tdx off", func(f *facts.Facts) { f.TEE.TDX.KVMTDX = ptr(false) }, "tdx.kvm.param", check.Fail},
		{"no keys", func(f *facts.Facts) { f.Cgroups.MiscCapacity["tdx"] = 0 }, "tdx.keys", check.Fail},
		{"no sgx is a warning", func(f *facts.Facts) { f.TEE.SGX = facts.SGX{} }, "tdx.sgx", check.Warn},
		{"amd cpu", func(f *facts.Facts) { f.CPU.Vendor = "amd" }, "tdx.cpu.generation", check.Fail},
		{"vendor kernel", func(f *facts.Facts) { f.Kernel.Release = "6.8.0-1028-intel" }, "tdx.kernel.version", check.Warn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ready()
			tt.mutate(f)
			v := evaluator(t, f).Evaluate(f, []platform.Platform{p}, check.Options{})[0]
			if fd := findingOf(t, v, tt.id); fd.Status != tt.want {
				t.Errorf("%s: %s %q, want %s", tt.id, fd.Status, fd.Message, tt.want)
			}
		})
	}
}

// BenchmarkEvaluateAll evaluates every valid platform against facts in
// memory (the brief's budget: under 1 ms).
func BenchmarkEvaluateAll(b *testing.B) {
	f := readyFacts()
	f.Unknown = []facts.Missing{{Field: "devices.kvm", Reason: facts.ReasonOffline}, {Field: "qemuProbe", Reason: facts.ReasonNotRun}}
	e := evaluator(b, f)
	ps := platform.All()
	b.ReportAllocs()
	for b.Loop() {
		e.Evaluate(f, ps, check.Options{})
	}
}

// TestEvaluateTogetherEqualsAlone backs the evaluator's reuse of findings
// between a platform and its debug twin: evaluating every platform at once
// must give each the same verdict and findings as evaluating it alone, also
// when a handler is configured for only one of the twins.
func TestEvaluateTogetherEqualsAlone(t *testing.T) {
	f := readyFacts()
	f.Unknown = []facts.Missing{{Field: "qemuProbe", Reason: facts.ReasonNotRun}}
	if f.Runtimes.Containerd != nil {
		f.Runtimes.Containerd.Handlers = append(f.Runtimes.Containerd.Handlers, facts.Handler{Name: "kubeadm-qemu-snp", RuntimeType: "io.containerd.kata.v2", Snapshotter: "nydus"})
	}
	e := evaluator(t, f)
	ps := platform.All()
	together := e.Evaluate(f, ps, check.Options{})
	for j, p := range ps {
		alone := e.Evaluate(f, []platform.Platform{p}, check.Options{})[0]
		got := together[j]
		if got.Platform != alone.Platform || got.Status != alone.Status || got.BlockedBy != alone.BlockedBy ||
			got.Failures != alone.Failures || got.Warnings != alone.Warnings || got.Unknowns != alone.Unknowns ||
			len(got.Findings) != len(alone.Findings) {
			t.Fatalf("%s: together %+v, alone %+v", p, got, alone)
		}
		for k := range got.Findings {
			a, b := got.Findings[k], alone.Findings[k]
			if a.ID != b.ID || a.Status != b.Status || a.Raw != b.Raw || a.Message != b.Message || a.Severity != b.Severity {
				t.Fatalf("%s: finding %s: together %s %q, alone %s %q", p, a.ID, a.Status, a.Message, b.Status, b.Message)
			}
		}
	}
}

// TestAppliesIgnoresDebug: the evaluator assumes a check applies to a
// platform and its debug twin alike, and reads the same facts on both.
func TestAppliesIgnoresDebug(t *testing.T) {
	for _, p := range platform.All() {
		if !p.Debug() {
			continue
		}
		s := p.Spec()
		s.Debug = false
		base, err := platform.New(s)
		if err != nil {
			t.Fatalf("%s without debug: %v", p, err)
		}
		for _, c := range For(readyFacts()) {
			s1, ok1 := c.Applies(p)
			s2, ok2 := c.Applies(base)
			if s1 != s2 || ok1 != ok2 {
				t.Errorf("%s: Applies(%s) = %v,%v but Applies(%s) = %v,%v", c.ID, p, s1, ok1, base, s2, ok2)
			}
			if c.ReadsFor != nil && !slices.Equal(c.ReadsFor(p), c.ReadsFor(base)) {
				t.Errorf("%s: ReadsFor(%s) = %q but ReadsFor(%s) = %q", c.ID, p, c.ReadsFor(p), base, c.ReadsFor(base))
			}
		}
	}
}

// TestWithPlugins: the catalogue a caller built with All, completed with
// a host's plug-in checks, is For's, check by check, and the caller's
// slice is left as it was.
func TestWithPlugins(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    *facts.Facts
	}{
		{"no plug-ins", readyFacts()},
		{"plug-in error and finding", &facts.Facts{Plugins: facts.Plugins{
			Errors:   []facts.PluginError{{Name: "site", Message: "not executable"}},
			Findings: []facts.PluginFinding{{Plugin: "attest", ID: "tpm", Status: "fail"}},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := All()
			ids := func(cs []check.Check) []string {
				out := make([]string, len(cs))
				for i, c := range cs {
					out[i] = c.ID
				}
				return out
			}
			before := ids(all)
			got, want := ids(WithPlugins(all, tc.f)), ids(For(tc.f))
			if !slices.Equal(got, want) {
				t.Errorf("WithPlugins: %v\nFor: %v", got, want)
			}
			if len(want) == len(before) && len(tc.f.Plugins.Findings) > 0 {
				t.Error("no plug-in checks were added")
			}
			if !slices.Equal(ids(all), before) || len(all) != len(before) {
				t.Error("WithPlugins changed the catalogue it was given")
			}
			if cap(All()) != len(All()) {
				t.Errorf("All has capacity %d for %d checks: built with room to spare", cap(All()), len(All()))
			}
		})
	}
}

// TestEvaluatePlan backs the plan that `check --all` makes while discovery
// runs, with the static catalogue, and evaluates with the host's plug-in
// checks added: every way of using a plan must give Evaluate's verdicts,
// and evaluating must leave the plan as it was made.
func TestEvaluatePlan(t *testing.T) {
	f := readyFacts()
	f.Unknown = []facts.Missing{{Field: "qemuProbe", Reason: facts.ReasonNotRun}}
	f.Plugins.Errors = []facts.PluginError{{Name: "broken", Message: "exit status 2"}}
	f.Plugins.Findings = []facts.PluginFinding{{Plugin: "attest", ID: "pcr", Status: "fail", Message: "PCR 7 differs"}, {Plugin: "site", Status: "pass"}}
	other := readyFacts()
	other.Plugins.Findings = []facts.PluginFinding{{Plugin: "other", Status: "warn"}}
	static := All()
	ps := platform.All()
	withPlugins := evaluator(t, f)
	if len(withPlugins.Checks()) != len(static)+3 {
		t.Fatalf("%d checks with plug-ins, want %d", len(withPlugins.Checks()), len(static)+3)
	}
	want := withPlugins.Evaluate(f, ps, check.Options{})
	newEv := func(cs []check.Check) *check.Evaluator {
		e, err := check.NewEvaluator(cs)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, tc := range []struct {
		name string
		by   *check.Evaluator // the evaluator that makes the plan
	}{
		{"same catalogue", withPlugins},
		{"static prefix", newEv(static)},
		{"shorter prefix", newEv(static[:len(static)/2])},
		{"other plug-ins", evaluator(t, other)},
		{"longer", newEv(append(For(f), For(other)[len(static):]...))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := tc.by.Plan(ps)
			if got := plan.Platforms(); len(got) != len(ps) || got[0] != ps[0] {
				t.Fatalf("plan of %d platforms, want %d", len(got), len(ps))
			}
			for range 2 {
				if got := withPlugins.EvaluatePlan(f, plan, check.Options{}); !reflect.DeepEqual(got, want) {
					t.Fatal("verdicts differ from Evaluate's")
				}
			}
			if !reflect.DeepEqual(plan, tc.by.Plan(ps)) {
				t.Error("evaluating changed the plan")
			}
		})
	}
}

// TestKubeletTimeoutAppliesToGuestPull: the kubelet's runtimeRequestTimeout
// is judged only where the guest pulls images.
func TestKubeletTimeoutAppliesToGuestPull(t *testing.T) {
	f := readyFacts()
	f.Kubelet = facts.Kubelet{}
	for _, tt := range []struct {
		platform string
		applies  bool
	}{
		{"kubeadm-qemu-snp", true},
		{"kubeadm-qemu-none+nydus", true},
		{"kubeadm-qemu-none", false},
		{"kubeadm-firecracker-none", false},
	} {
		_, ok := finding(t, f, tt.platform, "distribution.kubelet.timeout")
		if ok != tt.applies {
			t.Errorf("%s: applies %v, want %v", tt.platform, ok, tt.applies)
		}
	}
}
