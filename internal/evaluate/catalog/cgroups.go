package catalog

import (
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

func cgroupChecks() []check.Check {
	return []check.Check{{
		ID:        "cgroups.version",
		Title:     "for the unified cgroup hierarchy (v2)",
		Why:       "Kata sizes and accounts sandboxes through cgroups; cgroup v1 still works but is deprecated by Kubernetes and by Kata.",
		Reads:     []string{"cgroups.version"},
		Platforms: "all (warning)",
		Remedies:  []string{"boot with systemd.unified_cgroup_hierarchy=1 (default on current distributions)"},
		Applies:   check.Always(check.Warning),
		Run: func(f *facts.Facts) check.Result {
			ev := check.Ev("cgroups.version", f.Cgroups.Version)
			switch f.Cgroups.Version {
			case 2:
				return check.Ok("cgroup v2", ev)
			case 1:
				return check.Warned("cgroup v1 (deprecated)", "boot with systemd.unified_cgroup_hierarchy=1", ev)
			}
			return check.Unsure("cgroup version not detected", ev)
		},
	}, {
		ID:        "cgroups.controllers",
		Title:     "for cgroup controllers cpu, memory and pids",
		Why:       "Pod resource limits and the sandbox's pod overhead are enforced through the cpu, memory and pids controllers.",
		Parent:    "cgroups.version",
		Reads:     []string{"cgroups.controllers"},
		Platforms: "all",
		Remedies:  []string{"enable the controllers (cgroup_enable=memory on some ARM boards; systemd delegates them by default)"},
		Applies:   check.Always(check.Blocking),
		Run: func(f *facts.Facts) check.Result {
			var missing []string
			for _, c := range []string{"cpu", "memory", "pids"} {
				if !slices.Contains(f.Cgroups.Controllers, c) {
					missing = append(missing, c)
				}
			}
			ev := check.Ev("cgroups.controllers", f.Cgroups.Controllers)
			if len(f.Cgroups.Controllers) == 0 {
				return check.Unsure("no cgroup controllers reported", ev)
			}
			if len(missing) > 0 {
				return check.Failed("missing cgroup controllers: "+strings.Join(missing, ", "),
					"enable them on the kernel command line (e.g. cgroup_enable=memory) and reboot", ev)
			}
			return check.Ok("cpu, memory and pids available", ev)
		},
	}}
}

func itoa(n int) string { return strconv.Itoa(n) }
