package mountinfo

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Mount
		err      string
	}{
		{"kernel lines", "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n" +
			"35 22 0:30 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate\n" +
			`412 28 8:1 /var/lib/with\040space /mnt/a\011b rw - ext4 /dev/sda1 rw` + "\n", []Mount{
			{Root: "/", Point: "/sys", FSType: "sysfs"},
			{Root: "/", Point: "/sys/fs/cgroup/unified", FSType: "cgroup2"},
			{Root: "/var/lib/with space", Point: "/mnt/a\tb", FSType: "ext4"},
		}, ""},
		{"no optional fields, no final newline", "1 0 0:1 / / rw - rootfs rootfs rw", []Mount{{Root: "/", Point: "/", FSType: "rootfs"}}, ""},
		{"empty", "", nil, ""},
		{"no separator", "1 0 0:1 / / rw\n", nil, "mountinfo line 1: expected at least 5 fields"},
		{"too few fields", "1 0 0:1 / / rw - x x rw\n1 0 0:1 / - tmpfs tmpfs rw\n", []Mount{{Root: "/", Point: "/", FSType: "x"}}, "mountinfo line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestParseLive reads this process's own mountinfo: the kernel's real
// output, which must parse whole and contain the root.
func TestParseLive(t *testing.T) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var root bool
	for _, m := range ms {
		root = root || m.Point == "/"
		if m.FSType == "" {
			t.Errorf("mount %+v has no filesystem type", m)
		}
	}
	if !root {
		t.Errorf("no mount at / among %d mounts", len(ms))
	}
}

func FuzzParse(f *testing.F) {
	f.Add("22 28 0:21 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n")
	f.Add(`412 28 8:1 /a\040b /m\134n rw - ext4 /dev/sda1 rw`)
	f.Add("1 0 0:1 / / rw\n")
	f.Fuzz(func(t *testing.T, in string) {
		ms, err := Parse(strings.NewReader(in))
		if err == nil && len(ms) > strings.Count(in, "\n")+1 {
			t.Fatalf("%d mounts from %d lines", len(ms), strings.Count(in, "\n")+1)
		}
		for _, m := range ms {
			if strings.Contains(m.FSType, " ") {
				t.Fatalf("filesystem type %q has a space", m.FSType)
			}
		}
	})
}
