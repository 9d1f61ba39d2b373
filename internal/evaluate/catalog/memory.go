package catalog

import (
	"fmt"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// sandboxMiB is what one pod of the platform takes from the host: its pod
// overhead plus the guest's memory.
func sandboxMiB(p platform.Platform) int { return p.PodOverhead().MemoryMiB + guestMiB(p) }

// guestMiB is the memory of a sandbox VM whose containers set no limits:
// default_memory, plus the default workload memory where VMs are sized
// statically (confidential AKS: 256 + 1792 MiB).
func guestMiB(p platform.Platform) int { return p.DefaultMemoryMiB() + p.StaticWorkloadMemoryMiB() }

func memoryChecks() []check.Check {
	return []check.Check{{
		ID:        "memory.sandbox",
		Title:     "for memory for one sandbox",
		Why:       "Each pod's VM takes the RuntimeClass pod overhead plus the guest's default memory up front; a host without that much memory cannot schedule a single sandbox.",
		Reads:     []string{"memory.totalKiB"},
		Platforms: "all",
		Remedies:  []string{"add memory or use a platform with a smaller overhead (GPU platforms need about 18 GiB per pod)"},
		Applies:   onNode(check.Always(check.Blocking)),
		Key:       keyMemory,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			need := uint64(sandboxMiB(p))
			total, avail := f.Memory.TotalKiB/1024, f.Memory.AvailableKiB/1024
			ev := []check.Evidence{check.Ev("memory.totalKiB", f.Memory.TotalKiB), check.Ev("memory.availableKiB", f.Memory.AvailableKiB)}
			o := p.PodOverhead().MemoryMiB
			switch {
			case f.Memory.TotalKiB == 0:
				return check.Unsure("total memory not reported", ev...)
			case total < need:
				return check.Failed(fmt.Sprintf("%d MiB of memory, one sandbox needs %d MiB (overhead %d + guest %d)", total, need, o, guestMiB(p)),
					"add memory or choose a platform with a smaller overhead", ev...)
			case f.Memory.AvailableKiB == 0:
				// Without MemAvailable the host may not have that much
				// free: total memory alone does not pass.
				if u, ok := unknownOf(f, "memory.availableKiB"); ok {
					return check.Unsure(fmt.Sprintf("%d MiB in total, but how much is available is not known", total), append(ev, u)...)
				}
			case avail < need:
				return check.Warned(fmt.Sprintf("only %d MiB available now, one sandbox needs %d MiB", avail, need),
					"free memory on the node before scheduling sandboxes", ev...)
			}
			return check.Ok(fmt.Sprintf("%d MiB, one sandbox needs %d MiB", total, need), ev...)
		},
	}, {
		ID:        "memory.hugepages",
		Title:     "for free huge pages where configured",
		Why:       "When huge pages are reserved, Kata guests configured to use them fail to start once the pool is exhausted.",
		Reads:     []string{"memory.hugePages"},
		Platforms: "all (warning)",
		Remedies:  []string{"raise vm.nr_hugepages or the hugepages= kernel parameter, or stop using huge pages for sandboxes"},
		Applies:   onNode(check.Always(check.Warning)),
		Run: func(f *facts.Facts) check.Result {
			var configured bool
			for _, h := range f.Memory.HugePages {
				if h.Total == 0 {
					continue
				}
				configured = true
				ev := check.Ev(fmt.Sprintf("memory.hugePages[%dkB]", h.SizeKiB), fmt.Sprintf("total %d free %d", h.Total, h.Free))
				if h.Free == 0 {
					return check.Warned(fmt.Sprintf("all %d huge pages of %d kB are in use", h.Total, h.SizeKiB), "raise vm.nr_hugepages", ev)
				}
			}
			if !configured {
				return check.Ok("no huge pages configured")
			}
			return check.Ok("huge pages configured and free")
		},
	}}
}

// inotifyMin is what Contrast documents for its nodes.
const inotifyMin = 8192

func limitChecks() []check.Check {
	return []check.Check{{
		ID:        "limits.inotify",
		Title:     "for inotify instance limits",
		Why:       "Every sandbox's shim and virtiofsd take inotify instances; the common default of 128 runs out with a few dozen pods (Contrast documents at least 8192).",
		Reads:     []string{"limits.inotifyMaxUserInstances"},
		Platforms: "all (warning)",
		Remedies:  []string{"sysctl -w fs.inotify.max_user_instances=8192 and persist it in /etc/sysctl.d/90-berth.conf"},
		Applies:   check.Always(check.Warning),
		Run: func(f *facts.Facts) check.Result {
			v := f.Limits.InotifyMaxUserInstances
			ev := check.Ev("limits.inotifyMaxUserInstances", v)
			switch {
			case v == nil:
				return check.Unsure("fs.inotify.max_user_instances not reported", ev)
			case *v < inotifyMin:
				return check.Warned(fmt.Sprintf("fs.inotify.max_user_instances is %d, below %d", *v, inotifyMin),
					"sysctl -w fs.inotify.max_user_instances=8192 and persist it in /etc/sysctl.d/", ev)
			}
			return check.Ok(fmt.Sprintf("fs.inotify.max_user_instances is %d", *v), ev)
		},
	}}
}
