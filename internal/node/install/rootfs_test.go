package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/treetest"
)

// TestResolveIn: install's use of the one resolver (hostfs.Resolve, whose
// cases are in hostfs' TestResolve): a refusal is a *RefusedError that
// the CLI exits 1 for, matching hostfs.ErrOutsideRoot when the path
// leaves the root; a prefix must be absolute and a directory.
func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "var/opt"), 0o755)
	os.Symlink("/var/opt", filepath.Join(root, "opt"))
	os.Symlink("../../..", filepath.Join(root, "up"))
	os.Symlink("/nowhere", filepath.Join(root, "dangling"))
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	r, err := hostfs.OpenWritable(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct {
		in, rel string
		exists  bool
		refuse  string
		outside bool
	}{
		{in: "/", rel: ".", exists: true},
		{in: "/opt/berth", rel: "var/opt/berth"},
		{in: "/opt", rel: "var/opt", exists: true},
		{in: "/up/berth", refuse: "resolves outside the host root", outside: true},
		{in: "/dangling/berth", refuse: "does not exist inside the host root"},
		{in: "/file", refuse: "/file is not a directory (regular file)"},
		{in: "/file/berth", refuse: "not a directory"},
		{in: "opt/berth", refuse: "absolute"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			rel, exists, err := ResolveIn(r, tc.in)
			if tc.refuse != "" {
				var re *RefusedError
				if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.refuse) || errors.Is(err, hostfs.ErrOutsideRoot) != tc.outside || !configure.IsRefused(err) {
					t.Fatalf("ResolveIn(%s) = %q, %v, %v; want a refusal with %q (outside %v)", tc.in, rel, exists, err, tc.refuse, tc.outside)
				}
				return
			}
			if err != nil || rel != tc.rel || exists != tc.exists {
				t.Fatalf("ResolveIn(%s) = %q, %v, %v; want %q, %v", tc.in, rel, exists, err, tc.rel, tc.exists)
			}
		})
	}
}

// TestUninstallLeavesChangedEntries: uninstall deletes what the record
// lists, and only entries still as berth wrote them; a modified file, a
// file replaced by a symlink, a directory replaced by a symlink and a
// file berth did not install stay, each reported.
func TestUninstallLeavesChangedEntries(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	e := newEnv(t)
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	res := install(t, e.installer(t, rel.mirror(t)), rel.m, snp)
	v := filepath.Join(e.prefix, versionsDir, res.Plan.ID)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "keep"), []byte("outside"), 0o644)
	before := treetest.Listing(t, outside)

	// Same size, other bytes: only the digest tells.
	qemu := filepath.Join(v, "bin/qemu-system-x86_64")
	data, _ := os.ReadFile(qemu)
	data[0] ^= 0xff
	os.WriteFile(qemu, data, 0o755)
	// An archive member replaced by a symlink to a file outside.
	member := filepath.Join(v, "share/kata-qemu/qemu/bios-256k.bin")
	os.Remove(member)
	os.Symlink(filepath.Join(outside, "keep"), member)
	// A directory of the installation replaced by a symlink to outside.
	ovmf := filepath.Join(v, "share/ovmf")
	os.RemoveAll(ovmf)
	os.Symlink(outside, ovmf)
	// A file berth did not install.
	os.WriteFile(filepath.Join(v, "bin/mine"), []byte("x"), 0o644)
	// A top-level link the user replaced with a directory of their own.
	os.Remove(filepath.Join(e.prefix, "share"))
	os.MkdirAll(filepath.Join(e.prefix, "share"), 0o755)

	rm, err := e.installer(t).Uninstall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]string{}
	for _, k := range rm.Kept {
		kept[k.Path] = k.Why
	}
	for p, why := range map[string]string{
		qemu:                                     "sha256",
		member:                                   "symlink",
		filepath.Join(e.prefix, "share"):         "not berth's link",
		filepath.Join(v, "share/ovmf/AMDSEV.fd"): "symlink",
	} {
		if !strings.Contains(kept[p], why) {
			t.Errorf("%s: kept %q, want a reason with %q (kept: %v)", p, kept[p], why, rm.Kept)
		}
	}
	for _, p := range []string{qemu, member, ovmf, filepath.Join(v, "bin/mine"), filepath.Join(v, recordFile)} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	// What was still berth's is gone.
	for _, p := range []string{"bin/containerd-shim-kata-v2", "share/kata-containers/vmlinuz-confidential.container", "share/kata-qemu/qemu/kvmvapic.bin", "bin/kata-runtime"} {
		if _, err := os.Lstat(filepath.Join(v, p)); err == nil {
			t.Errorf("%s is still there", p)
		}
	}
	for _, l := range []string{currentLink, "bin"} {
		if _, err := os.Lstat(filepath.Join(e.prefix, l)); err == nil {
			t.Errorf("link %s is still there", l)
		}
	}
	if after := treetest.Listing(t, outside); after != before {
		t.Errorf("outside changed:\nbefore %s\nafter  %s", before, after)
	}
}

// TestUninstallVersion1Record: a record written before digests were
// recorded (no recordVersion, no files) still uninstalls: plain files are
// checked against their component's digest, archive members by type.
func TestUninstallVersion1Record(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	e := newEnv(t)
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	res := install(t, e.installer(t, rel.mirror(t)), rel.m, snp)
	v := filepath.Join(e.prefix, versionsDir, res.Plan.ID)
	rp := filepath.Join(v, recordFile)
	data, _ := os.ReadFile(rp)
	var raw map[string]any
	json.Unmarshal(data, &raw)
	delete(raw, "recordVersion")
	for _, c := range raw["components"].([]any) {
		delete(c.(map[string]any), "files")
	}
	data, _ = json.Marshal(raw)
	os.WriteFile(rp, data, 0o644)
	// A plain file changed: its component's digest tells.
	kernel := filepath.Join(v, "share/kata-containers/vmlinuz-confidential.container")
	k, _ := os.ReadFile(kernel)
	k[10] ^= 1
	os.WriteFile(kernel, k, 0o644)

	st, err := e.installer(t).Layout.Status()
	if err != nil || st.Current == nil || st.Current.RecordVersion != 0 {
		t.Fatalf("status of a version 1 record: %+v %v", st, err)
	}
	rm, err := e.installer(t).Uninstall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Kept) != 1 || rm.Kept[0].Path != kernel || !strings.Contains(rm.Kept[0].Why, "sha256") {
		t.Fatalf("kept %v, want only the changed kernel", rm.Kept)
	}
	if _, err := os.Stat(filepath.Join(v, "bin/qemu-system-x86_64")); err == nil {
		t.Error("qemu is still there")
	}
	if _, err := os.Stat(filepath.Join(v, "share/defaults/kata-containers/configuration-qemu-snp.toml")); err == nil {
		t.Error("an archive member is still there")
	}
}

// TestRecordHasDigests: the record lists every installed file with its
// SHA-256, archive members included.
func TestRecordHasDigests(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	e := newEnv(t)
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	install(t, e.installer(t, rel.mirror(t)), rel.m, snp)
	st, err := e.installer(t).Layout.Status()
	if err != nil || st.Current == nil || st.Current.RecordVersion != RecordVersion {
		t.Fatalf("status %+v %v", st, err)
	}
	n := 0
	want := rel.expect(t, snp)
	for _, c := range st.Current.Components {
		for _, f := range c.Files {
			n++
			w, ok := want[f.Path]
			if !ok || f.Size != int64(len(w.data)) || f.SHA256 != sha256hex(w.data) || f.Mode != fmt.Sprintf("%04o", w.mode) {
				t.Errorf("%s: recorded %+v", f.Path, f)
			}
		}
	}
	if n != len(want) {
		t.Errorf("%d files recorded, want %d", n, len(want))
	}
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
