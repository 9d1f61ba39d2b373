package discover

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/goldenfile"
)

// tempRoot builds a host tree: files maps paths to contents, links maps
// paths to symlink targets.
func tempRoot(t *testing.T, files, links map[string]string) *session {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		fp := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fp, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		fp := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, fp); err != nil {
			t.Fatal(err)
		}
	}
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &session{root: root}
}

// blockDev adds a sysfs block device the way the kernel lays it out: the
// real directory under sys/devices and a sys/block symlink to it.
func blockDev(files, links map[string]string, name, devPath, size, rotational string) {
	real := "sys/devices/" + devPath + "/block/" + name
	files[real+"/size"] = size + "\n"
	files[real+"/queue/rotational"] = rotational + "\n"
	links["sys/block/"+name] = "../devices/" + devPath + "/block/" + name
}

func TestStorage(t *testing.T) {
	files, links := map[string]string{}, map[string]string{}
	blockDev(files, links, "nvme0n1", "pci0000:00/0000:00:01.1/0000:01:00.0/nvme/nvme0", "1875385008", "0")
	blockDev(files, links, "sda", "pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0", "3907029168", "1")
	blockDev(files, links, "sdb", "platform/host3/session1/target3:0:0/3:0:0:0", "2097152", "0")
	blockDev(files, links, "vda", "pci0000:00/0000:00:04.0/virtio1", "41943040", "1")
	blockDev(files, links, "nbd0", "virtual", "0", "0")
	blockDev(files, links, "loop0", "virtual", "0", "0")
	blockDev(files, links, "loop1", "virtual", "131072", "0")
	blockDev(files, links, "zram0", "virtual", "0", "0")
	blockDev(files, links, "dm-0", "virtual", "2097152", "0")
	blockDev(files, links, "rbd0", "virtual", "20971520", "0")
	blockDev(files, links, "nvme1n1", "virtual/nvme-fabrics/ctl/nvme1", "209715200", "0")
	files["sys/devices/virtual/nvme-fabrics/ctl/nvme1/block/nvme1n1/device/transport"] = "tcp\n"
	s := tempRoot(t, files, links)
	var f facts.Facts
	runStorage(context.Background(), s, &f)
	goldenfile.AssertJSON(t, "testdata/storage/blockdevices.golden.json", f.Storage)

	got := map[string]facts.BlockDevice{}
	for _, d := range f.Storage.BlockDevices {
		got[d.Name] = d
	}
	for _, skipped := range []string{"loop0", "zram0"} {
		if _, ok := got[skipped]; ok {
			t.Errorf("%s has size 0 and should be skipped", skipped)
		}
	}
	want := map[string]struct {
		transport string
		remote    bool
		rot       bool
		size      uint64
	}{
		"nvme0n1": {"nvme", false, false, 1875385008 * 512},
		"nvme1n1": {"nvme", true, false, 209715200 * 512},
		"sda":     {"sata", false, true, 3907029168 * 512},
		"sdb":     {"iscsi", true, false, 2097152 * 512},
		"vda":     {"virtio", false, true, 41943040 * 512},
		"nbd0":    {"nbd", true, false, 0},
		"loop1":   {"loop", false, false, 131072 * 512},
		"rbd0":    {"rbd", true, false, 20971520 * 512},
		"dm-0":    {"dm", false, false, 2097152 * 512},
	}
	for name, w := range want {
		d, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if d.Transport != w.transport || d.Remote != w.remote || d.Rotational != w.rot || d.SizeBytes != w.size {
			t.Errorf("%s = %+v, want %+v", name, d, w)
		}
	}
}

func TestStorageDMOverISCSI(t *testing.T) {
	files, links := map[string]string{}, map[string]string{}
	blockDev(files, links, "sdb", "platform/host3/session1/target3:0:0/3:0:0:0", "2097152", "0")
	blockDev(files, links, "dm-1", "virtual", "2097152", "0")
	links["sys/devices/virtual/block/dm-1/slaves/sdb"] = "../../../../platform/host3/session1/target3:0:0/3:0:0:0/block/sdb"
	s := tempRoot(t, files, links)
	var f facts.Facts
	runStorage(context.Background(), s, &f)
	files["sys/devices/virtual/block/dm-1/dm/name"] = "containerd-pool\n"
	s = tempRoot(t, files, links)
	f = facts.Facts{}
	runStorage(context.Background(), s, &f)
	for _, d := range f.Storage.BlockDevices {
		if d.Name == "dm-1" && (!d.Remote || d.Transport != "dm" || d.DMName != "containerd-pool" || !reflect.DeepEqual(d.Slaves, []string{"sdb"})) {
			t.Errorf("dm-1 over iSCSI = %+v, want remote dm containerd-pool on sdb", d)
		}
	}
}

func TestStorageMissing(t *testing.T) {
	s := tempRoot(t, map[string]string{"etc/hostname": "x\n"}, nil)
	var f facts.Facts
	runStorage(context.Background(), s, &f)
	runNetwork(context.Background(), s, &f)
	want := map[string]string{
		"storage.blockDevices": facts.ReasonMissing,
		"storage.filesystems":  facts.ReasonOffline,
		"network.sriovNics":    facts.ReasonMissing,
	}
	if len(s.unknown) != len(want) {
		t.Errorf("unknown = %+v, want %v", s.unknown, want)
	}
	for _, m := range s.unknown {
		if r, ok := want[m.Field]; !ok || !strings.HasPrefix(m.Reason, r) {
			t.Errorf("unknown %s: %q, want reason %q", m.Field, m.Reason, r)
		}
	}
}

func TestNetworkSRIOV(t *testing.T) {
	pf := "sys/devices/pci0000:00/0000:3b:00.0"
	files := map[string]string{
		pf + "/sriov_totalvfs":                               "64\n",
		pf + "/sriov_numvfs":                                 "3\n",
		"sys/devices/pci0000:00/0000:3b:00.1/sriov_totalvfs": "0\n",
		"sys/devices/pci0000:00/0000:3c:00.0/sriov_totalvfs": "many\n",
		"sys/devices/virtual/net/lo/.keep":                   "",
	}
	links := map[string]string{
		"sys/class/net/ens1f0":                                  "../../devices/pci0000:00/0000:3b:00.0/net/ens1f0",
		pf + "/net/ens1f0/device":                               "../../../0000:3b:00.0",
		pf + "/driver":                                          "../../../bus/pci/drivers/ice",
		pf + "/virtfn0":                                         "../0000:3b:01.0",
		pf + "/virtfn1":                                         "../0000:3b:01.1",
		pf + "/virtfn10":                                        "../0000:3b:02.2",
		"sys/bus/pci/devices/0000:3b:01.0/driver":               "../../../../bus/pci/drivers/vfio-pci",
		"sys/bus/pci/devices/0000:3b:01.0/iommu_group":          "../../../../kernel/iommu_groups/71",
		"sys/bus/pci/devices/0000:3b:01.1/driver":               "../../../../bus/pci/drivers/iavf",
		"sys/class/net/ens1f1":                                  "../../devices/pci0000:00/0000:3b:00.1/net/ens1f1",
		"sys/devices/pci0000:00/0000:3b:00.1/net/ens1f1/device": "../../../0000:3b:00.1",
		"sys/class/net/bad0":                                    "../../devices/pci0000:00/0000:3c:00.0/net/bad0",
		"sys/devices/pci0000:00/0000:3c:00.0/net/bad0/device":   "../../../0000:3c:00.0",
		"sys/class/net/lo":                                      "../../devices/virtual/net/lo",
	}
	s := tempRoot(t, files, links)
	var f facts.Facts
	runNetwork(context.Background(), s, &f)
	group := 71
	want := []facts.SRIOVNIC{{Interface: "ens1f0", TotalVFs: 64, NumVFs: 3, Address: "0000:3b:00.0", Driver: "ice",
		VFs: []facts.SRIOVVF{
			{Address: "0000:3b:01.0", Driver: "vfio-pci", IOMMUGroup: &group},
			{Address: "0000:3b:01.1", Driver: "iavf"},
			{Address: "0000:3b:02.2"}, // virtfn10 sorts after virtfn1 by number, not by name
		}}}
	if !reflect.DeepEqual(f.Network.SRIOVNICs, want) {
		t.Errorf("SRIOVNICs = %+v, want %+v", f.Network.SRIOVNICs, want)
	}
	if len(s.unknown) != 1 || !strings.Contains(s.unknown[0].Reason, "sys/class/net/bad0/device/sriov_totalvfs:1") {
		t.Errorf("unknown = %+v, want bad0's unparseable count", s.unknown)
	}
}

func TestDistributionRules(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"crio without rhcos is not openshift", map[string]string{"etc/crio/crio.conf": "", "etc/kubernetes/kubelet.conf": ""}, "kubeadm"},
		{"crio on rhcos", map[string]string{"etc/crio/crio.conf": "", "etc/os-release": "ID=\"rhcos\"\n"}, "openshift"},
		{"waagent alone is not aks", map[string]string{"var/lib/waagent/x": ""}, ""},
		{"azure dmi with kubelet", map[string]string{"sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n", "usr/bin/kubelet": ""}, "aks"},
		{"azure dmi without kubelet", map[string]string{"sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n"}, ""},
		{"aks beats kubeadm", map[string]string{"etc/default/kubelet": "KUBELET_FLAGS=--azure-container-registry-config=x\n", "etc/kubernetes/kubelet.conf": ""}, "aks"},
		{"k3s beats kubeadm", map[string]string{"etc/rancher/k3s/config.yaml": "", "etc/kubernetes/kubelet.conf": ""}, "k3s"},
		{"installed unit beats leftover markers", map[string]string{"var/lib/rancher/k3s/x": "", "usr/lib/systemd/system/rke2-server.service": ""}, "rke2"},
		{"containerd unit alone is no distribution", map[string]string{"usr/lib/systemd/system/containerd.service": ""}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := detectDistribution(tempRoot(t, tt.files, nil))
			if d.Name != tt.want {
				t.Errorf("distribution = %q (%v), want %q", d.Name, d.Evidence, tt.want)
			}
		})
	}
}

func TestMisplacedHandlers(t *testing.T) {
	s := tempRoot(t, map[string]string{
		"etc/containerd/config.toml": "version = 3\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata-qemu]\nruntime_type = \"io.containerd.kata-qemu.v2\"\n",
	}, nil)
	r := containerdFacts(s, "", nil)
	if r == nil || len(r.Handlers) != 0 || len(r.IgnoredHandlers) != 1 || !strings.Contains(r.IgnoredHandlers[0], `"kata-qemu"`) {
		t.Fatalf("containerd = %+v, want kata-qemu ignored", r)
	}
}

func TestStorageSlavePartitions(t *testing.T) {
	files, links := map[string]string{}, map[string]string{}
	iscsi := "platform/host3/session1/target3:0:0/3:0:0:0"
	blockDev(files, links, "sdb", iscsi, "2097152", "0")
	blockDev(files, links, "nvme0n1", "pci0000:00/0000:01:00.0/nvme/nvme0", "1875385008", "0")
	blockDev(files, links, "dm-3", "virtual", "2097152", "0")
	// An LVM volume over two partitions: the slaves name partitions.
	files["sys/devices/"+iscsi+"/block/sdb/sdb1/partition"] = "1\n"
	files["sys/devices/pci0000:00/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p3/partition"] = "3\n"
	links["sys/devices/virtual/block/dm-3/slaves/sdb1"] = "../../../../" + iscsi + "/block/sdb/sdb1"
	links["sys/devices/virtual/block/dm-3/slaves/nvme0n1p3"] = "../../../../pci0000:00/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p3"
	s := tempRoot(t, files, links)
	var f facts.Facts
	runStorage(context.Background(), s, &f)
	for _, d := range f.Storage.BlockDevices {
		if d.Name == "dm-3" {
			slices.Sort(d.Slaves)
			if !d.Remote || !reflect.DeepEqual(d.Slaves, []string{"nvme0n1", "sdb"}) {
				t.Errorf("dm-3 = %+v, want remote on disks nvme0n1 and sdb", d)
			}
			return
		}
	}
	t.Error("dm-3 missing")
}

func TestFilesystemsRecorded(t *testing.T) {
	tests := []struct {
		name     string
		recorded string
		want     []facts.Filesystem
		unknown  string
	}{
		{"no recording", "", nil, facts.ReasonOffline},
		{"recorded probe", `{"schemaVersion":1,"probes":{"filesystems":[{"path":"opt/kata","measured":"opt","sizeBytes":1000,"freeBytes":10,"device":"nvme0n1"}]}}`,
			[]facts.Filesystem{{Path: "opt/kata", Measured: "opt", SizeBytes: 1000, FreeBytes: 10, Device: "nvme0n1", Recorded: true}}, ""},
		{"bad recording", `{"schemaVersion":1,"probes":{"filesystems":{"path":1}}}`, nil, facts.ReasonUnparseable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string]string{"sys/block/.keep": ""}
			if tt.recorded != "" {
				files[hostfs.RecordedFile] = tt.recorded
			}
			s := tempRoot(t, files, nil)
			var f facts.Facts
			runStorage(context.Background(), s, &f)
			if !reflect.DeepEqual(f.Storage.Filesystems, tt.want) {
				t.Errorf("filesystems = %+v, want %+v", f.Storage.Filesystems, tt.want)
			}
			var got string
			for _, m := range s.unknown {
				if m.Field == "storage.filesystems" {
					got = m.Reason
				}
			}
			if !strings.HasPrefix(got, tt.unknown) || (tt.unknown == "") != (got == "") {
				t.Errorf("storage.filesystems unknown = %q, want reason %q", got, tt.unknown)
			}
		})
	}
}

func TestStatfsLive(t *testing.T) {
	// statfs of a real directory: the sizes are the machine's, so only
	// their consistency is asserted; the device link is the fixture's.
	s := tempRoot(t, map[string]string{"var/lib/containerd/.keep": ""}, nil)
	fsys, err := s.statfs("opt/kata", s.existingAncestor("opt/kata"))
	if err != nil {
		t.Fatal(err)
	}
	if fsys.Measured != "." || fsys.SizeBytes == 0 || fsys.FreeBytes > fsys.SizeBytes {
		t.Errorf("statfs = %+v, want the root measured with free <= size", fsys)
	}
	if got := s.existingAncestor("var/lib/containerd/io.containerd.snapshotter.v1.blockfile"); got != "var/lib/containerd" {
		t.Errorf("existingAncestor = %q, want var/lib/containerd", got)
	}
}

func TestBlockDeviceOf(t *testing.T) {
	s := tempRoot(t, map[string]string{
		"sys/devices/pci0000:00/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1/partition": "1\n",
	}, map[string]string{
		"sys/dev/block/259:1": "../../devices/pci0000:00/0000:01:00.0/nvme/nvme0/nvme0n1/nvme0n1p1",
		"sys/dev/block/253:3": "../../devices/virtual/block/dm-3",
		"sys/dev/block/8:16":  "../../devices/platform/host3/session1/target3:0:0/3:0:0:0/block/sdb",
	})
	for _, tt := range []struct {
		major, minor uint32
		want         string
	}{{259, 1, "nvme0n1"}, {253, 3, "dm-3"}, {8, 16, "sdb"}, {0, 45, ""}} {
		if got := s.blockDeviceOf(tt.major, tt.minor); got != tt.want {
			t.Errorf("blockDeviceOf(%d:%d) = %q, want %q", tt.major, tt.minor, got, tt.want)
		}
	}
}
