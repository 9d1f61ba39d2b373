package catalog

import (
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

func TestFreeSpace(t *testing.T) {
	fsys := func(path string, freeGiB, sizeGiB uint64) facts.Filesystem {
		return facts.Filesystem{Path: path, Measured: path, FreeBytes: freeGiB << 30, SizeBytes: sizeGiB << 30, Device: "nvme0n1"}
	}
	tests := []struct {
		name   string
		fs     []facts.Filesystem
		id, on string
		status check.Status
		msg    string
	}{
		{"prefix roomy", []facts.Filesystem{fsys("opt/berth", 50, 100), fsys("opt/kata", 50, 100)}, "storage.free.prefix", "kubeadm-qemu-none", check.Pass, "50.0 GiB free"},
		{"prefix below one payload", []facts.Filesystem{fsys("opt/berth", 1, 20), fsys("opt/kata", 1, 20)}, "storage.free.prefix", "kubeadm-qemu-none", check.Fail, "only 1.0 GiB free"},
		{"prefix below two payloads", []facts.Filesystem{fsys("opt/berth", 3, 20)}, "storage.free.prefix", "kubeadm-qemu-none", check.Warn, "not for an upgrade"},
		{"the fuller prefix decides", []facts.Filesystem{fsys("opt/berth", 50, 100), fsys("opt/kata", 1, 8)}, "storage.free.prefix", "kubeadm-qemu-none", check.Fail, "/opt/kata"},
		{"no prefix measured", []facts.Filesystem{fsys("var/lib/containerd", 50, 100)}, "storage.free.prefix", "kubeadm-qemu-none", check.Unknown, "no install prefix"},
		{"images roomy", []facts.Filesystem{fsys("var/lib/containerd", 50, 100)}, "storage.free.images", "kubeadm-qemu-none", check.Pass, "50.0 GiB free under /var/lib/containerd"},
		{"images below the kubelet threshold", []facts.Filesystem{fsys("var/lib/containerd", 14, 100)}, "storage.free.images", "kubeadm-qemu-none", check.Warn, "15% image eviction"},
		{"erofs below one rw layer", []facts.Filesystem{fsys("var/lib/containerd", 8, 20)}, "storage.free.images", "kubeadm-qemu-none+erofs", check.Fail, "less than one erofs writable layer"},
		{"overlayfs with 8 GiB of 20", []facts.Filesystem{fsys("var/lib/containerd", 8, 20)}, "storage.free.images", "kubeadm-qemu-none", check.Pass, "8.0 GiB"},
		{"k3s root", []facts.Filesystem{fsys("var/lib/containerd", 1, 100), fsys("var/lib/rancher/k3s/agent/containerd", 60, 100)}, "storage.free.images", "k3s-qemu-none", check.Pass, "/var/lib/rancher/k3s/agent/containerd"},
		{"k3s root missing", []facts.Filesystem{fsys("var/lib/containerd", 60, 100)}, "storage.free.images", "k3s-qemu-none", check.Unknown, "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := readyFacts()
			f.Storage.Filesystems = tt.fs
			fd, ok := finding(t, f, tt.on, tt.id)
			if !ok {
				t.Fatalf("%s does not apply to %s", tt.id, tt.on)
			}
			wantFinding(t, fd, tt.status, tt.msg)
		})
	}
	t.Run("offline root without a recorded statfs", func(t *testing.T) {
		f := readyFacts()
		f.Storage.Filesystems = nil
		f.Unknown = []facts.Missing{{Field: "storage.filesystems", Reason: facts.ReasonOffline}}
		for _, id := range []string{"storage.free.prefix", "storage.free.images"} {
			fd, _ := finding(t, f, "kubeadm-qemu-none", id)
			wantFinding(t, fd, check.Unknown, "storage.filesystems")
		}
	})
}

func TestPoolRemote(t *testing.T) {
	iscsi := facts.BlockDevice{Name: "sdb", Transport: "iscsi", Remote: true}
	nvme := facts.BlockDevice{Name: "nvme0n1", Transport: "nvme"}
	rbd := facts.BlockDevice{Name: "rbd0", Transport: "rbd", Remote: true}
	tests := []struct {
		name   string
		pool   string
		devs   []facts.BlockDevice
		fs     []facts.Filesystem
		on     string
		status check.Status
		msg    string
	}{
		{"devmapper pool on NVMe", "containerd-pool", []facts.BlockDevice{nvme, {Name: "dm-2", Transport: "dm", DMName: "containerd-pool", Slaves: []string{"nvme0n1"}}}, nil,
			"kubeadm-firecracker-none", check.Pass, "local dm device dm-2"},
		{"LVM thin pool on iSCSI", "vg0-thinpool", []facts.BlockDevice{iscsi, {Name: "dm-4", Transport: "dm", Remote: true, DMName: "vg0-thinpool-tpool", Slaves: []string{"dm-3"}},
			{Name: "dm-3", Transport: "dm", Remote: true, DMName: "vg0-thinpool_tdata", Slaves: []string{"sdb"}}}, nil,
			"kubeadm-firecracker-none", check.Warn, "dm on dm dm-3 on iscsi sdb"},
		{"pool not active", "containerd-pool", []facts.BlockDevice{nvme}, nil, "kubeadm-firecracker-none", check.Unknown, "not active"},
		{"no pool_name", "", []facts.BlockDevice{nvme}, nil, "kubeadm-firecracker-none", check.Unknown, "pool_name"},
		{"blockfile root on RBD", "", []facts.BlockDevice{nvme, rbd}, []facts.Filesystem{{Path: "var/lib/containerd", Measured: "var/lib/containerd", FreeBytes: 1 << 40, SizeBytes: 2 << 40, Device: "rbd0"}},
			"kubeadm-qemu-none+blockfile", check.Warn, "blockfile root /var/lib/containerd is on network storage"},
		{"blockfile root on tmpfs", "", []facts.BlockDevice{nvme}, []facts.Filesystem{{Path: "var/lib/containerd", Measured: "var/lib/containerd", FreeBytes: 1 << 40, SizeBytes: 2 << 40}},
			"kubeadm-qemu-none+blockfile", check.Unknown, "no block device"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := readyFacts()
			f.Runtimes.Containerd.DevmapperPool = tt.pool
			f.Storage.BlockDevices = tt.devs
			if tt.fs != nil {
				f.Storage.Filesystems = tt.fs
			}
			fd, ok := finding(t, f, tt.on, "storage.pool.remote")
			if !ok {
				t.Fatalf("storage.pool.remote does not apply to %s", tt.on)
			}
			wantFinding(t, fd, tt.status, tt.msg)
		})
	}
	t.Run("only block-pool snapshotters", func(t *testing.T) {
		for _, name := range []string{"kubeadm-qemu-none", "kubeadm-qemu-snp", "kubeadm-qemu-none+erofs"} {
			if _, ok := finding(t, readyFacts(), name, "storage.pool.remote"); ok {
				t.Errorf("storage.pool.remote applies to %s", name)
			}
		}
	})
}
