package catalog

import (
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// peerPodsDir holds the socket on which Kata's remote hypervisor dials the
// cloud-api-adaptor (/run/peerpod/hypervisor.sock, remote_hypervisor_socket
// in Kata 4.1's configuration-remote.toml); the adaptor's DaemonSet mounts
// it from the host. Discovery records the directory: fact paths are
// dotted, so a file name with a dot cannot be one.
const peerPodsDir = "run/peerpod"

func isRemote(p platform.Platform) bool { return !p.Local() }

func onMSHV(p platform.Platform) bool { return p.HypervisorDevice() == mshvDevice }

// mshvDevice is the Microsoft Hypervisor's root-partition device, through
// which Cloud Hypervisor and OpenVMM run Kata's VMs on AKS (Pod Sandboxing
// and Confidential Containers nodes, Azure Linux).
const mshvDevice = "dev/mshv"

// presence builds a check that a path the platform's hypervisor needs
// exists on the node (a device node or a socket directory); missing says
// what its absence means.
func presence(c check.Check, path, missing, present, remedy string) check.Check {
	c.Reads = []string{"devices.nodes." + path}
	c.Remedies = []string{remedy}
	c.Run = func(f *facts.Facts) check.Result {
		_, ok := node(f, path)
		ev := check.Ev("devices.nodes."+path+".exists", ok)
		if !ok {
			return check.Failed("/"+path+" is missing: "+missing, remedy, ev)
		}
		return check.Ok("/"+path+" present"+present, ev)
	}
	return c
}

// remoteChecks are the node-side checks of the hypervisors that do not run
// on the node's KVM: AKS's Hyper-V root partition, and peer pods, whose VM
// runs in a cloud started by the cloud-api-adaptor.
func remoteChecks() []check.Check {
	return []check.Check{
		presence(check.Check{
			ID:    "mshv.device",
			Title: "if device /dev/mshv exists",
			Why: "On AKS, Kata's Cloud Hypervisor (clh-azure, kata-cc) and OpenVMM run sandbox VMs on the Hyper-V root partition through /dev/mshv, not KVM; " +
				"only nodes of AKS's Kata node pools (Azure Linux, --workload-runtime KataVmIsolation, formerly KataMshvVmIsolation) have it.",
			Parent:    "virt.hardware",
			Platforms: "aks platforms",
			Applies:   check.When(check.Blocking, onMSHV),
		}, mshvDevice, "this is not a node of an AKS Kata node pool", "",
			"run Kata pods on an AKS node pool created with az aks nodepool add --os-sku AzureLinux --workload-runtime KataVmIsolation (KataMshvVmIsolation on older CLIs; a VM size with nested virtualisation)"),
		presence(check.Check{
			ID:    "remote.adaptor",
			Title: "for the peer-pods cloud-api-adaptor",
			Why: "With peer pods, Kata's shim asks the cloud-api-adaptor (a DaemonSet of the peer-pods operator) to start each sandbox as a cloud VM, " +
				"over /run/peerpod/hypervisor.sock; without it every pod fails at sandbox creation.",
			Platforms: "remote (peer pods)",
			Applies:   check.When(check.Blocking, isRemote),
		}, peerPodsDir, "no cloud-api-adaptor has run on this node", " (the cloud-api-adaptor's socket directory)",
			"deploy the peer-pods cloud-api-adaptor (confidential-containers/cloud-api-adaptor) for your cloud; its DaemonSet creates /run/peerpod/hypervisor.sock"),
	}
}
