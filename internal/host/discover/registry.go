package discover

// subsystems is the fixed list of discovery steps; each runs concurrently.
// Each subsystem file adds one line here; keep the list sorted by name.
func subsystems() []subsystem {
	return []subsystem{
		{"cgroups", runCgroups},
		{"cpu", runCPU},
		{"devices", runDevices},
		{"iommu", runIOMMU},
		{"kernel", runKernel},
		{"memory", runMemory},
		{"network", runNetwork},
		{"os", runOSRelease},
		{"pci", runPCI},
		{"plugins", runPlugins},
		{"qemu-probe", runQEMUProbe},
		{"runtimes", runRuntimes}, // also distribution, kubelet and binaries
		{"storage", runStorage},
		{"tee", runTEE},
		{"virt", runVirt},
	}
}
