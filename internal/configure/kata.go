package configure

import (
	"path"

	"berth.dev/berth/platform"
)

// DefaultPrefix is where berth installs Kata's binaries and guest
// artefacts (the kata-static layout, relocated).
const DefaultPrefix = "/opt/berth"

// Paths are the host paths of what a platform runs, all under Prefix.
type Paths struct {
	Prefix string
}

// Shim is the containerd shim v2 binary of Kata.
func (ps Paths) Shim() string { return path.Join(ps.Prefix, "bin/containerd-shim-kata-v2") }

// KataConfig is the Kata configuration file of platform p (one per
// platform, so that applying p never touches q's file).
func (ps Paths) KataConfig(p platform.Platform) string {
	return path.Join(ps.Prefix, "etc/kata", p.Name()+".toml")
}

func (ps Paths) bin(name string) string   { return path.Join(ps.Prefix, "bin", name) }
func (ps Paths) share(name string) string { return path.Join(ps.Prefix, "share/kata-containers", name) }
func (ps Paths) ovmf(name string) string  { return path.Join(ps.Prefix, "share/ovmf", name) }

// hypervisorSection is the [hypervisor.X] table Kata reads for p.
func hypervisorSection(h platform.Hypervisor) string {
	switch h {
	case platform.CloudHypervisor:
		return "clh"
	case platform.Firecracker:
		return "firecracker"
	}
	return "qemu"
}

// guestFlavour names the guest kernel and image variant: Kata ships one
// per combination of GPU and confidential stack.
func guestFlavour(p platform.Platform) string {
	conf := p.Confidential() || p.GuestPull()
	switch {
	case p.GPU() && conf:
		return "nvidia-gpu-confidential"
	case p.GPU():
		return "nvidia-gpu"
	case conf:
		return "confidential"
	}
	return ""
}

// snpGuestPolicy is QEMU's default SNP policy (0x30000: SMT allowed,
// reserved bit 17 set, no debug, no migration agent); Kata writes it out
// because the ID block, when used, must carry the same value.
const snpGuestPolicy = 0x30000

// KataConfig renders the Kata configuration TOML for p with every path
// under ps.Prefix. It depends only on the platform and the prefix: the
// node's facts do not change it.
func KataConfig(p platform.Platform, ps Paths) []byte {
	var d doc
	d.comment(header(p, "Kata Containers configuration ("+p.KataConfigFile()+" equivalent)", nil))
	sec := hypervisorSection(p.Hypervisor())
	d.table("hypervisor", sec)
	flav := guestFlavour(p)
	suffix := ""
	if flav != "" {
		suffix = "-" + flav
	}
	d.kv("path", hypervisorPath(p, ps))
	kernel := "vmlinux.container"
	if flav != "" {
		kernel = "vmlinuz" + suffix + ".container"
	}
	d.kv("kernel", ps.share(kernel))
	// Confidential guests without a GPU boot from an initrd, which is
	// measured with the kernel; the others from a rootfs image.
	if p.Confidential() && !p.GPU() && p.Hypervisor() == platform.QEMU {
		d.kv("initrd", ps.share("kata-containers-initrd"+suffix+".img"))
	} else {
		d.kv("image", ps.share("kata-containers"+suffix+".img"))
	}
	if p.Hypervisor() == platform.QEMU {
		d.kv("machine_type", "q35")
		switch p.TEE() {
		case platform.SNP:
			d.kv("firmware", ps.ovmf("AMDSEV.fd"))
		case platform.TDX:
			d.kv("firmware", ps.ovmf("OVMF.inteltdx.fd"))
		}
	}
	if p.Hypervisor() == platform.CloudHypervisor && p.TEE() == platform.SNP {
		// Cloud Hypervisor on Hyper-V boots SNP guests from an IGVM file.
		d.kv("igvm", ps.share("kata-containers-igvm.img"))
	}
	d.kv("valid_hypervisor_paths", []string{hypervisorPath(p, ps)})
	if p.Confidential() {
		d.kv("confidential_guest", true)
		if p.TEE() == platform.SNP {
			d.kv("sev_snp_guest", true)
			if p.Hypervisor() == platform.QEMU {
				d.kv("snp_guest_policy", snpGuestPolicy)
			}
		}
		d.kv("disable_image_nvdimm", true)
	}
	if p.Hypervisor() != platform.Firecracker {
		d.kv("shared_fs", p.SharedFS())
		if p.SharedFS() == "virtio-fs" {
			d.kv("virtio_fs_daemon", path.Join(ps.Prefix, "libexec/virtiofsd"))
			d.kv("valid_virtio_fs_daemon_paths", []string{path.Join(ps.Prefix, "libexec/virtiofsd")})
		}
	}
	if p.GPU() {
		// GPUs are cold-plugged behind PCIe root ports: hot-plug would let
		// the host change the guest's devices after measurement, and large
		// GPU BARs do not fit a bridge.
		d.kv("cold_plug_vfio", "root-port")
		d.kv("hot_plug_vfio", "no-port")
		d.kv("pcie_root_port", 0)
	}
	d.kv("default_vcpus", 1)
	d.kv("default_memory", p.DefaultMemoryMiB())
	params := ""
	if p.Debug() {
		params = "agent.log=debug initcall_debug"
	}
	d.kv("kernel_params", params)
	d.kv("enable_debug", p.Debug())

	d.table("agent", "kata")
	d.kv("enable_debug", p.Debug())
	d.kv("debug_console_enabled", p.Debug())
	d.kv("dial_timeout", 90)

	d.table("runtime")
	d.kv("enable_debug", p.Debug())
	d.kv("internetworking_model", "tcfilter")
	d.kv("disable_guest_seccomp", true)
	d.kv("sandbox_cgroup_only", p.GPU())
	// Guests that cannot hot-plug memory and CPUs (TEEs, GPUs with cold
	// plug, Firecracker) are sized once from the pod's requests.
	d.kv("static_sandbox_resource_mgmt", p.Confidential() || p.GPU() || p.Hypervisor() == platform.Firecracker)
	if p.GuestPull() && p.Snapshotter() != platform.Nydus {
		d.kv("experimental_force_guest_pull", true)
	}
	return d.bytes()
}

// hypervisorPath is the hypervisor binary of p.
func hypervisorPath(p platform.Platform, ps Paths) string {
	switch p.Hypervisor() {
	case platform.CloudHypervisor:
		return ps.bin("cloud-hypervisor")
	case platform.Firecracker:
		return ps.bin("firecracker")
	}
	return ps.bin("qemu-system-x86_64")
}

// KnownKataKeys are the keys Kata reads in each table berth writes, as they
// appear in Kata's src/runtime/config/configuration-{qemu,qemu-snp,
// qemu-tdx,qemu-coco-dev,qemu-nvidia-gpu,qemu-nvidia-gpu-snp,clh,clh-snp,
// fc}.toml.in templates (kata-containers main, 2025). Tests check every
// rendered key against it, so that a typo never reaches a node, where Kata
// would silently ignore it.
func KnownKataKeys() map[string][]string {
	common := []string{"path", "kernel", "image", "initrd", "kernel_params", "default_vcpus", "default_maxvcpus",
		"default_memory", "default_maxmemory", "default_bridges", "enable_debug", "valid_hypervisor_paths",
		"enable_annotations", "block_device_driver", "disable_block_device_use", "rootfs_type",
		"disable_selinux", "disable_guest_selinux", "disable_nesting_checks", "enable_iommu", "guest_hook_path"}
	fs := []string{"shared_fs", "virtio_fs_daemon", "valid_virtio_fs_daemon_paths", "virtio_fs_cache_size",
		"virtio_fs_extra_args", "virtio_fs_cache"}
	cc := []string{"confidential_guest", "sev_snp_guest", "firmware"}
	return map[string][]string{
		"hypervisor.qemu": append(append(append(append([]string{}, common...), fs...), cc...),
			"machine_type", "snp_guest_policy", "snp_id_block", "snp_id_auth", "firmware_volume",
			"machine_accelerators", "cpu_features", "disable_image_nvdimm", "pcie_root_port",
			"cold_plug_vfio", "hot_plug_vfio", "memory_slots", "enable_virtio_mem", "msize_9p",
			"rootless", "kernel_verity_params", "enable_numa"),
		"hypervisor.clh": append(append(append(append([]string{}, common...), fs...), cc...),
			"igvm", "snp_guest_policy", "disable_image_nvdimm", "hot_plug_vfio", "cold_plug_vfio", "pcie_root_port"),
		"hypervisor.firecracker": append(append([]string{}, common...), "jailer_path", "valid_jailer_paths"),
		"agent.kata":             {"enable_debug", "enable_tracing", "kernel_modules", "debug_console_enabled", "dial_timeout", "launch_process_timeout"},
		"runtime": {"enable_debug", "internetworking_model", "disable_guest_seccomp", "enable_vcpus_pinning",
			"enable_tracing", "disable_new_netns", "sandbox_cgroup_only", "static_sandbox_resource_mgmt",
			"sandbox_bind_mounts", "vfio_mode", "disable_guest_empty_dir", "experimental", "enable_pprof",
			"experimental_force_guest_pull", "create_container_timeout", "dan_conf"},
		"factory": {"enable_template", "template_path", "vm_cache_number", "vm_cache_endpoint"},
	}
}
