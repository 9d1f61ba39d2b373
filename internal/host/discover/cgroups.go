package discover

import (
	"context"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
)

func runCgroups(_ context.Context, s *session, f *facts.Facts) {
	c := &f.Cgroups
	c.Version = s.cgroupVersion()
	miscPath := "sys/fs/cgroup/misc.capacity"
	switch c.Version {
	case 2:
		if v, ok := s.readString("cgroups.controllers", "sys/fs/cgroup/cgroup.controllers"); ok {
			c.Controllers = strings.Fields(v)
		}
	case 1:
		miscPath = "sys/fs/cgroup/misc/misc.capacity"
		if b, ok := s.readFile("cgroups.controllers", "proc/cgroups"); ok {
			c.Controllers = parseProcCgroups(b)
		}
	default:
		s.unknownf("cgroups.version", "%s: no cgroup filesystem at sys/fs/cgroup (proc/mounts, sys/fs/cgroup/cgroup.controllers)", facts.ReasonMissing)
	}
	if c.Version != 0 {
		if b, ok := s.readFile("cgroups.miscCapacity", miscPath); ok {
			mc, err := parseMiscCapacity(b)
			if err != nil {
				s.unknownf("cgroups.miscCapacity", "%s", parseReason(miscPath, err))
			} else {
				c.MiscCapacity = mc
			}
		}
	}
	limit := func(field, p string) *int {
		v, ok := s.readString(field, p)
		if !ok {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			s.unknownf(field, "%s", unparseable(p, 1, "expected a number"))
			return nil
		}
		return &n
	}
	f.Limits.InotifyMaxUserInstances = limit("limits.inotifyMaxUserInstances", "proc/sys/fs/inotify/max_user_instances")
	f.Limits.InotifyMaxUserWatches = limit("limits.inotifyMaxUserWatches", "proc/sys/fs/inotify/max_user_watches")
}

// cgroupVersion reads proc/mounts for the filesystem at /sys/fs/cgroup:
// cgroup2 there is v2; a tmpfs with cgroup (v1) hierarchies is v1 (also
// the hybrid layout). Without proc/mounts (fixtures) the presence of
// cgroup.controllers decides. 0 means unknown.
func (s *session) cgroupVersion() int {
	if b, err := s.root.FS().ReadFile("proc/mounts"); err == nil {
		v1 := false
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			switch {
			case f[1] == "/sys/fs/cgroup" && f[2] == "cgroup2":
				return 2
			case strings.HasPrefix(f[1], "/sys/fs/cgroup/") && f[2] == "cgroup":
				v1 = true
			}
		}
		if v1 {
			return 1
		}
	}
	if s.exists("sys/fs/cgroup/cgroup.controllers") {
		return 2
	}
	if s.exists("proc/cgroups") && s.exists("sys/fs/cgroup") {
		return 1
	}
	return 0
}

// parseProcCgroups returns the enabled v1 controllers of proc/cgroups
// ("#subsys_name hierarchy num_cgroups enabled").
func parseProcCgroups(b []byte) []string {
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[3] == "1" {
			out = append(out, f[0])
		}
	}
	return out
}

// parseMiscCapacity parses misc.capacity lines "name capacity" (sev, sev_es,
// tdx ...). Keys are whole words: callers look them up exactly, never by
// prefix. A malformed line is an error naming it.
func parseMiscCapacity(b []byte) (map[string]int64, error) {
	out := map[string]int64{}
	for n, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, &lineError{line: n + 1, msg: "expected \"name capacity\""}
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if f[1] == "max" {
			v, err = -1, nil
		}
		if err != nil || v < -1 {
			return nil, &lineError{line: n + 1, msg: "expected \"name capacity\" with a number"}
		}
		out[f[0]] = v
	}
	return out, nil
}
