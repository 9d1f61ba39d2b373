package discover

import (
	"strings"
	"testing"
)

func TestRunMemory(t *testing.T) {
	root := coreRoot(t, map[string]string{
		"proc/meminfo": "MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:   8192 kB\nHugePages_Total:       0\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":   "512\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages": "256\n",
		"sys/devices/system/node/node0/meminfo":                   "",
		"sys/devices/system/node/node1/meminfo":                   "",
		"sys/devices/system/node/possible":                        "0-1\n",
	})
	f, u := runSub(t, root, runMemory)
	m := f.Memory
	if m.TotalKiB != 16384 || m.AvailableKiB != 8192 || m.NUMANodes != 2 || len(m.HugePages) != 1 || m.HugePages[0].Total != 512 || m.HugePages[0].Free != 256 || m.HugePages[0].SizeKiB != 2048 {
		t.Errorf("memory = %+v", m)
	}
	if len(u) != 0 {
		t.Errorf("unknown %v", u)
	}
	_, u = runSub(t, coreRoot(t, map[string]string{"proc/meminfo": "MemTotal: 1 kB\nMemAvailable lots\n"}), runMemory)
	if !strings.Contains(u["memory"], "proc/meminfo:2") {
		t.Errorf("memory unknown = %q", u["memory"])
	}
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte("MemTotal:       16384 kB\nHugePages_Total:       0\n"))
	f.Fuzz(func(t *testing.T, b []byte) { parseMeminfo(b) })
}
