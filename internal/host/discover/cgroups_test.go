package discover

import (
	"strings"
	"testing"
)

func TestRunCgroups(t *testing.T) {
	root := coreRoot(t, map[string]string{
		"proc/mounts":                            "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n",
		"sys/fs/cgroup/cgroup.controllers":       "cpuset cpu io memory hugetlb pids rdma misc\n",
		"sys/fs/cgroup/misc.capacity":            "sev 410\nsev_es 99\n",
		"proc/sys/fs/inotify/max_user_instances": "8192\n",
		"proc/sys/fs/inotify/max_user_watches":   "524288\n",
	})
	f, u := runSub(t, root, runCgroups)
	c := f.Cgroups
	if c.Version != 2 || len(c.Controllers) != 8 || c.MiscCapacity["sev_es"] != 99 || c.MiscCapacity["sev"] != 410 {
		t.Errorf("cgroups %+v", c)
	}
	if _, ok := c.MiscCapacity["tdx"]; ok {
		t.Error("tdx matched by prefix")
	}
	if *f.Limits.InotifyMaxUserInstances != 8192 || *f.Limits.InotifyMaxUserWatches != 524288 {
		t.Errorf("limits %+v", f.Limits)
	}
	if len(u) != 0 {
		t.Errorf("unknown %v", u)
	}
}

func TestRunCgroupsV1AndBad(t *testing.T) {
	root := coreRoot(t, map[string]string{
		"proc/mounts":                      "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n",
		"proc/cgroups":                     "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t2\t1\t1\nmemory\t3\t1\t1\nrdma\t0\t1\t0\n",
		"sys/fs/cgroup/misc/misc.capacity": "sev 1 2\n",
	})
	f, u := runSub(t, root, runCgroups)
	if f.Cgroups.Version != 1 || strings.Join(f.Cgroups.Controllers, ",") != "cpu,memory" {
		t.Errorf("v1 %+v", f.Cgroups)
	}
	if !strings.Contains(u["cgroups.miscCapacity"], "misc.capacity:1") {
		t.Errorf("misc unknown %q", u["cgroups.miscCapacity"])
	}
	if !strings.Contains(u["limits.inotifyMaxUserInstances"], "missing") {
		t.Errorf("limits unknown %q", u["limits.inotifyMaxUserInstances"])
	}
}

func FuzzParseMiscCapacity(f *testing.F) {
	f.Add([]byte("sev 410\nsev_es 99\ntdx 31\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMiscCapacity(b)
		if err == nil {
			for k := range m {
				if strings.ContainsAny(k, " \t\n") {
					t.Fatalf("key %q has spaces", k)
				}
			}
		}
	})
}
