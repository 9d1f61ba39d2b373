package discover

import (
	"context"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
)

func runMemory(_ context.Context, s *session, f *facts.Facts) {
	m := &f.Memory
	if b, ok := s.readFile("memory", "proc/meminfo"); ok {
		mi, err := parseMeminfo(b)
		if err != nil {
			s.unknownf("memory", "%s", parseReason("proc/meminfo", err))
		} else {
			m.TotalKiB = mi["MemTotal"]
			m.AvailableKiB = mi["MemAvailable"]
			if _, ok := mi["MemTotal"]; !ok {
				s.unknownf("memory.totalKiB", "%s", unparseable("proc/meminfo", 0, "no MemTotal"))
			}
			if _, ok := mi["MemAvailable"]; !ok {
				s.unknownf("memory.availableKiB", "%s", unparseable("proc/meminfo", 0, "no MemAvailable"))
			}
		}
	}
	s.hugePages(m)
	if ents, err := s.root.FS().ReadDir("sys/devices/system/node"); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "node") && allDigits(e.Name()[4:]) {
				m.NUMANodes++
			}
		}
	} else {
		s.unknownf("memory.numaNodes", "%s", ReadReason("sys/devices/system/node", err))
	}
}

// hugePages reads every pool under sys/kernel/mm/hugepages.
func (s *session) hugePages(m *facts.Memory) {
	const dir = "sys/kernel/mm/hugepages"
	ents, err := s.root.FS().ReadDir(dir)
	if err != nil {
		s.unknownf("memory.hugePages", "%s", ReadReason(dir, err))
		return
	}
	for _, e := range ents {
		size, ok := strings.CutPrefix(e.Name(), "hugepages-")
		size, ok2 := strings.CutSuffix(size, "kB")
		if !ok || !ok2 {
			continue
		}
		kib, err := strconv.ParseUint(size, 10, 64)
		if err != nil {
			continue
		}
		hp := facts.HugePage{SizeKiB: kib}
		num := func(name string) uint64 {
			p := dir + "/" + e.Name() + "/" + name
			v, ok := s.readString("", p)
			if !ok {
				return 0
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				s.unknownf("memory.hugePages", "%s", unparseable(p, 1, "expected a number"))
			}
			return n
		}
		hp.Total, hp.Free = num("nr_hugepages"), num("free_hugepages")
		m.HugePages = append(m.HugePages, hp)
	}
}

// parseMeminfo parses proc/meminfo ("MemTotal:  16384 kB") into KiB
// values. A line without "key:" and a number is an error naming the line.
func parseMeminfo(b []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	for n, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		fields := strings.Fields(v)
		if !ok || len(fields) == 0 || len(fields) > 2 || (len(fields) == 2 && fields[1] != "kB") {
			return nil, &lineError{line: n + 1, msg: "expected \"Key: number [kB]\""}
		}
		x, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return nil, &lineError{line: n + 1, msg: "expected \"Key: number [kB]\""}
		}
		out[strings.TrimSpace(k)] = x
	}
	return out, nil
}
