package configure

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/hostfs"
)

// TestApplyHostileConfig: a config.toml berth would edit that is not a
// plain file of bounded size is refused fast, by name, and nothing on the
// host changes: a FIFO (it would block for good), a link to a character
// device like /dev/zero (it would be read without end), a file over the
// read cap, 40,000 keys in one table (go-toml's duplicate tracking is
// quadratic), and a dangling absolute link (apply would create the path it
// names).
func TestApplyHostileConfig(t *testing.T) {
	const main = "etc/containerd/config.toml"
	for _, tc := range []struct {
		name  string
		build func(t *testing.T, dir string)
		want  string
		// refused: the error is a refusal (exit 1, nothing was changed).
		refused bool
	}{
		{"FIFO", func(t *testing.T, dir string) {
			if err := unix.Mkfifo(filepath.Join(dir, main), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file (FIFO)", false},
		{"link to a character device", func(t *testing.T, dir string) {
			testkit.NeedsRoot(t, "mknod of a character device")
			os.MkdirAll(filepath.Join(dir, "dev"), 0o755)
			if err := unix.Mknod(filepath.Join(dir, "dev/zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
				t.Fatalf("mknod (the tests run as root, as CI does): %v", err)
			}
			os.Symlink("/dev/zero", filepath.Join(dir, main))
		}, "not a regular file (character device)", false},
		{"over the read cap", func(t *testing.T, dir string) {
			put(t, dir, main, "version = 2\n")
			if err := os.Truncate(filepath.Join(dir, main), hostfs.MaxConfigFile+1); err != nil {
				t.Fatal(err)
			}
		}, fmt.Sprintf("larger than %d bytes", hostfs.MaxConfigFile), false},
		{"40,000 keys in one table", func(t *testing.T, dir string) {
			var b strings.Builder
			b.WriteString("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n")
			for i := range 40000 {
				fmt.Fprintf(&b, "k%d = 1\n", i)
			}
			put(t, dir, main, b.String())
		}, "etc/containerd/config.toml:4097:1: more than 4096 keys and tables", true},
		{"dangling absolute link", func(t *testing.T, dir string) {
			os.Symlink("/etc/containerd/real.toml", filepath.Join(dir, main))
		}, "/etc/containerd/config.toml is a symlink to /etc/containerd/real.toml, which does not exist inside the host root", true},
		{"dangling link to a missing directory", func(t *testing.T, dir string) {
			os.Symlink("/srv/containerd/config.toml", filepath.Join(dir, main))
		}, "which does not exist inside the host root", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.MkdirAll(filepath.Join(dir, "etc/containerd"), 0o755)
			tc.build(t, dir)
			before := readTree(t, dir)
			r := render(t, "kubeadm-qemu-snp", "kubeadm", 2)
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := Apply(openRoot(t, dir), r)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("apply did not return within 30 s")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("apply took %v", d)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if IsRefused(err) != tc.refused {
				t.Errorf("IsRefused = %v, want %v: %v", IsRefused(err), tc.refused, err)
			}
			if after := readTree(t, dir); !maps.Equal(after, before) {
				t.Errorf("the host changed:\n%v\nnow\n%v", contents(before), contents(after))
			}
		})
	}
}

// TestApplyOutsideRootIsRefused: a config.toml linked out of the root is
// a refusal that names it and matches hostfs.ErrOutsideRoot.
func TestApplyOutsideRootIsRefused(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "etc/containerd"), 0o755)
	os.Symlink("../../../../../../../../etc/passwd", filepath.Join(dir, "etc/containerd/config.toml"))
	_, err := Apply(openRoot(t, dir), render(t, "kubeadm-qemu-snp", "kubeadm", 2))
	if !IsRefused(err) || !errors.Is(err, hostfs.ErrOutsideRoot) || !strings.Contains(err.Error(), "refusing /etc/containerd/config.toml") {
		t.Fatalf("error %v, want a refusal naming the file, outside the root", err)
	}
}
