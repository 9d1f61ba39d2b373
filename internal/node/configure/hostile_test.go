package configure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
)

// TestRemoveEscapingBackupLink: remove with the backups directory
// replaced by a link out of the root names the refusal (not "changed
// since berth backed it up", which is false), never reads the copy
// outside, and leaves it untouched.
func TestRemoveEscapingBackupLink(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "etc/containerd/config.toml", v2Main)
	fsys := openRoot(t, dir)
	r := render(t, "kubeadm-clh-none", "kubeadm", 2)
	if _, err := Apply(fsys, r); err != nil {
		t.Fatal(err)
	}
	// The copy outside holds exactly what a restore would want, so that
	// reading it would pass for an unchanged backup.
	outside := t.TempDir()
	backups := filepath.Join(dir, BackupDir)
	if err := os.Rename(backups, filepath.Join(outside, "backups")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "backups"), backups); err != nil {
		t.Fatal(err)
	}
	res, err := Remove(fsys, r.Handler)
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(res.Warnings, "\n")
	if !strings.Contains(w, "its backup "+BackupDir+"/etc/containerd/config.toml is refused") || !(strings.Contains(w, hostfs.ErrOutsideRoot.Error()) || strings.Contains(w, "does not exist inside the host root")) || strings.Contains(w, "changed since") {
		t.Errorf("warnings: %s", w)
	}
	if _, err := os.Stat(filepath.Join(outside, "backups/etc/containerd/config.toml")); err != nil {
		t.Errorf("the copy outside the root: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "etc/containerd/config.toml"))
	if err != nil || strings.Contains(string(got), r.Handler) {
		t.Errorf("config after remove still has the handler (%v):\n%s", err, got)
	}
}
