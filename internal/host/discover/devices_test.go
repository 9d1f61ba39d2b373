package discover

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

func TestDevicesOffline(t *testing.T) {
	s := openTree(t, map[string]string{
		"dev/kvm":          "",
		"dev/vhost-vsock":  "",
		"dev/vfio/vfio":    "",
		"dev/vfio/40":      "",
		"dev/vfio/devices": "->vfio",
		"etc/group":        "root:x:0:\n# comment\nkvm:x:108:alice\nbroken\n",
	})
	var f facts.Facts
	runDevices(context.Background(), s, &f)
	kvm := f.Devices.Nodes["dev/kvm"]
	// A plain file stands for the node: it exists, with a file's mode.
	if !kvm.Exists || kvm.Mode != "-rw-r--r--" || kvm.UID == nil || kvm.Accessible != nil {
		t.Errorf("dev/kvm = %s", jsonString(t, kvm))
	}
	if n := f.Devices.Nodes["dev/sev"]; n.Exists || n.Mode != "" {
		t.Errorf("dev/sev = %s", jsonString(t, n))
	}
	if !f.Devices.Nodes["dev/vfio/40"].Exists {
		t.Errorf("dev/vfio/40 not listed: %v", f.Devices.Nodes)
	}
	if _, ok := f.Devices.Nodes["dev/vfio/devices"]; ok {
		t.Errorf("dev/vfio/devices is not a group node")
	}
	if want := len(deviceNodes) + 1; len(f.Devices.Nodes) != want {
		t.Errorf("%d nodes, want %d", len(f.Devices.Nodes), want)
	}
	if f.Devices.KVM != nil {
		t.Errorf("KVM probe on an offline root: %s", jsonString(t, f.Devices.KVM))
	}
	if u := unknownMap(s); !reflect.DeepEqual(u, map[string]string{"devices.kvm": "offline root"}) {
		t.Errorf("unknown = %v", u)
	}
}

func TestDevicesRecordedProbes(t *testing.T) {
	s := openTree(t, map[string]string{
		".berth/recorded.json": `{"schemaVersion":1,"probes":{
			"kvm":{"opened":true,"apiVersion":12,"createVm":false,"errno":"EBUSY","error":"KVM_CREATE_VM: device or resource busy"},
			"devices":{"dev/kvm":{"exists":true,"mode":"crw-rw----","uid":0,"gid":108,"group":"kvm","accessible":true}}}}`,
	})
	var f facts.Facts
	runDevices(context.Background(), s, &f)
	want := &facts.KVMProbe{Opened: true, APIVersion: 12, Errno: "EBUSY", Error: "KVM_CREATE_VM: device or resource busy", Recorded: true}
	if !reflect.DeepEqual(f.Devices.KVM, want) {
		t.Errorf("kvm = %s", jsonString(t, f.Devices.KVM))
	}
	if n := f.Devices.Nodes["dev/kvm"]; n.Mode != "crw-rw----" || n.Group != "kvm" {
		t.Errorf("recorded dev/kvm = %s", jsonString(t, n))
	}
	if len(s.unknown) != 0 {
		t.Errorf("unknown = %v", s.unknown)
	}

	s = openTree(t, map[string]string{".berth/recorded.json": `{"schemaVersion":1,"probes":{"kvm":{"opened":"yes"}}}`})
	runDevices(context.Background(), s, &f)
	if u := unknownMap(s); u["devices.kvm"] == "" || f.Devices.KVM != nil {
		t.Errorf("malformed recorded probe: kvm %v unknown %v", f.Devices.KVM, u)
	}
}

func TestParseGroup(t *testing.T) {
	got := parseGroup("root:x:0:\nkvm:x:108:a,b\nkvm2:x:108:\nbad:x:nan:\n:x:5:\nshort\n")
	want := map[int]string{0: "root", 108: "kvm"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseGroup = %v, want %v", got, want)
	}
}

// TestKVMProbeLive runs the real probe against this machine's /dev/kvm
// through a live root. The expected outcome follows from what the node is:
// absent -> ENOENT; present -> opened, API 12, and a VM created unless
// another hypervisor holds VT-x/SVM (EBUSY).
func TestKVMProbeLive(t *testing.T) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	s := &session{root: root}
	var f facts.Facts
	runDevices(context.Background(), s, &f)
	p := f.Devices.KVM
	if p == nil {
		t.Fatal("no KVM probe on a live root")
	}
	t.Logf("live KVM probe: %s", jsonString(t, p))
	_, statErr := os.Stat("/dev/kvm")
	switch {
	case os.IsNotExist(statErr):
		if p.Opened || p.Errno != "ENOENT" {
			t.Errorf("no /dev/kvm: probe = %s, want Opened false, errno ENOENT", jsonString(t, p))
		}
	case p.Opened:
		if p.APIVersion != 12 || (!p.CreateVM && p.Errno == "") {
			t.Errorf("probe = %s, want API 12 and CreateVM or an errno", jsonString(t, p))
		}
	default:
		if p.Errno == "" {
			t.Errorf("/dev/kvm not opened without errno: %s", jsonString(t, p))
		}
	}
	n := f.Devices.Nodes["dev/kvm"]
	// Accessibility is a question about a node that exists: a machine
	// without /dev/kvm (most CI runners) has nothing to ask it of.
	if n.Exists && n.Accessible == nil {
		t.Errorf("live root: dev/kvm accessibility not checked: %s", jsonString(t, n))
	}
	if n.Exists && n.Mode[0] != 'c' {
		t.Errorf("/dev/kvm mode %q, want a character device", n.Mode)
	}

	// A missing node under a mounted live root gives ENOENT.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	live, err := hostfs.NewLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	s2 := &session{root: live}
	if got := s2.kvmProbe(); got.Opened || got.Errno != "ENOENT" {
		t.Errorf("missing node: %s", jsonString(t, got))
	}
	// dev/kvm linked to a file (inside or outside the root) is never
	// opened for writing: only a character device is.
	canary := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(canary, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(canary)
	if err := os.Symlink(canary, filepath.Join(dir, "dev", "kvm")); err != nil {
		t.Fatal(err)
	}
	if got := s2.kvmProbe(); got.Opened {
		t.Errorf("dev/kvm -> a file was opened: %s", jsonString(t, got))
	}
	if err := os.Remove(filepath.Join(dir, "dev", "kvm")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dev", "kvm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := s2.kvmProbe(); got.Opened {
		t.Errorf("dev/kvm as a regular file was opened: %s", jsonString(t, got))
	}
	if after, _ := os.Stat(canary); !after.ModTime().Equal(before.ModTime()) {
		t.Error("the file outside the root was touched")
	}
}
