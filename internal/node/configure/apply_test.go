package configure

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/platform"
)

// tree reads every regular file under dir with its mtime.
type fileState struct {
	data  string
	mtime time.Time
}

func readTree(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := e.Info()
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fileState{string(b), fi.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func contents(m map[string]fileState) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v.data
	}
	return out
}

func put(t *testing.T, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o640); err != nil {
		t.Fatal(err)
	}
}

func openRoot(t *testing.T, dir string) *hostfs.Writable {
	t.Helper()
	r, err := hostfs.OpenWritable(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func render(t *testing.T, plat, layout string, v int) *Rendered {
	t.Helper()
	r, err := Render(mustParse(t, plat), targetFor(t, layout, v), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const v2Main = "version = 2\nroot = \"/var/lib/containerd\"\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"" // no final newline on purpose

// TestApplyIdempotentSideBySideAndRemove applies two platforms into a
// containerd 1.x main config (in place, with a backup), checks that a
// second apply touches no file, that removing one keeps the other, and
// that removing both restores the original byte for byte with its mode.
func TestApplyIdempotentSideBySideAndRemove(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "etc/containerd/config.toml", v2Main)
	before := readTree(t, dir)
	fsys := openRoot(t, dir)

	p, q := render(t, "kubeadm-qemu-snp", "kubeadm", 2), render(t, "kubeadm-clh-none", "kubeadm", 2)
	for _, r := range []*Rendered{p, q} {
		res, err := Apply(fsys, r)
		if err != nil {
			t.Fatal(err)
		}
		want := 2
		if r.Platform.Snapshotter() == platform.Nydus {
			want = 4 // and the nydus-snapshotter config and unit
		}
		if len(res.Changed) != want {
			t.Errorf("apply %s changed %v, want the Kata config and the main config (and nydus' config and unit)", r.Handler, res.Changed)
		}
	}
	applied := readTree(t, dir)
	time.Sleep(20 * time.Millisecond)
	for _, r := range []*Rendered{p, q} {
		res, err := Apply(fsys, r)
		if err != nil || len(res.Changed) != 0 {
			t.Fatalf("second apply of %s: %v %v", r.Handler, res, err)
		}
	}
	if again := readTree(t, dir); !maps.Equal(again, applied) {
		t.Errorf("a second apply touched files (contents or mtimes changed)")
	}
	main := applied["etc/containerd/config.toml"].data
	c, err := runtimecfg.ParseContainerd("config.toml", []byte(main))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range c.Handlers {
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != q.Handler+","+p.Handler+",runc" {
		t.Errorf("handlers after apply: %v", names)
	}
	if _, ok := applied["var/lib/berth/backups/etc/containerd/config.toml"]; !ok {
		t.Error("no backup of the modified main config")
	}

	if _, err := Remove(fsys, p.Handler); err != nil {
		t.Fatal(err)
	}
	mid := readTree(t, dir)
	c, err = runtimecfg.ParseContainerd("config.toml", []byte(mid["etc/containerd/config.toml"].data))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Handlers) != 2 || c.Handlers[0].Name != q.Handler {
		t.Errorf("removing %s disturbed the others: %+v", p.Handler, c.Handlers)
	}
	if _, ok := mid["opt/berth/etc/kata/kubeadm-qemu-snp.toml"]; ok {
		t.Error("Kata config of the removed platform left behind")
	}
	if _, err := Remove(fsys, q.Handler); err != nil {
		t.Fatal(err)
	}
	if after := contents(readTree(t, dir)); !maps.Equal(after, contents(before)) {
		t.Errorf("after removing everything the tree differs:\n%v\nwant\n%v", after, contents(before))
	}
	fi, _ := os.Stat(filepath.Join(dir, "etc/containerd/config.toml"))
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 restored", fi.Mode().Perm())
	}
	res, err := Remove(fsys, q.Handler)
	if err != nil || len(res.Changed) != 0 {
		t.Errorf("removing twice: %v %v", res, err)
	}
}

// TestApplyCreatesAndRemovesMissingFiles: a k3s node without a template
// and a containerd 2.x node without a main config.
func TestApplyCreatesAndRemovesMissingFiles(t *testing.T) {
	for _, tc := range []struct{ plat, layout string }{{"k3s-qemu-tdx", "k3s"}, {"kubeadm-qemu-tdx", "kubeadm"}} {
		dir := t.TempDir()
		fsys := openRoot(t, dir)
		r := render(t, tc.plat, tc.layout, 3)
		if _, err := Apply(fsys, r); err != nil {
			t.Fatal(err)
		}
		if _, err := Remove(fsys, r.Handler); err != nil {
			t.Fatal(err)
		}
		if left := readTree(t, dir); len(left) != 0 {
			t.Errorf("%s: files left after remove: %v", tc.plat, contents(left))
		}
	}
	// microk8s always has its template: berth does not invent one.
	dir := t.TempDir()
	if _, err := Apply(openRoot(t, dir), render(t, "microk8s-qemu-none", "microk8s", 2)); err == nil ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing microk8s template: %v", err)
	}
}

func TestApplyRefusesBadInput(t *testing.T) {
	t.Run("config does not parse", func(t *testing.T) {
		dir := t.TempDir()
		put(t, dir, "etc/containerd/config.toml", "version = 2\n[plugins\nx = 1\n")
		before := readTree(t, dir)
		_, err := Apply(openRoot(t, dir), render(t, "kubeadm-qemu-snp", "kubeadm", 2))
		var pe *runtimecfg.ParseError
		if !errors.As(err, &pe) || pe.Line != 2 || pe.File != "etc/containerd/config.toml" {
			t.Fatalf("error %v, want a ParseError at etc/containerd/config.toml:2", err)
		}
		if !strings.Contains(err.Error(), "etc/containerd/config.toml:2:") {
			t.Errorf("message lacks file:line:column: %v", err)
		}
		if after := readTree(t, dir); !maps.Equal(after, before) {
			t.Error("files changed")
		}
	})
	t.Run("version mismatch", func(t *testing.T) {
		dir := t.TempDir()
		put(t, dir, "etc/containerd/config.toml", "version = 3\n")
		_, err := Apply(openRoot(t, dir), render(t, "kubeadm-qemu-snp", "kubeadm", 2))
		if err == nil || !strings.Contains(err.Error(), "version 3 config") {
			t.Errorf("v2 handler into a v3 config: %v", err)
		}
	})
	t.Run("symlink out of the root", func(t *testing.T) {
		dir := t.TempDir()
		outside := filepath.Join(t.TempDir(), "config.toml")
		os.WriteFile(outside, []byte("version = 2\n"), 0o644)
		os.MkdirAll(filepath.Join(dir, "etc/containerd"), 0o755)
		rel, _ := filepath.Rel(filepath.Join(dir, "etc/containerd"), outside)
		if err := os.Symlink(rel, filepath.Join(dir, "etc/containerd/config.toml")); err != nil {
			t.Fatal(err)
		}
		_, err := Apply(openRoot(t, dir), render(t, "kubeadm-qemu-snp", "kubeadm", 2))
		if !errors.Is(err, hostfs.ErrOutsideRoot) {
			t.Fatalf("error %v, want ErrOutsideRoot", err)
		}
		if b, _ := os.ReadFile(outside); string(b) != "version = 2\n" {
			t.Error("file outside the root was changed")
		}
	})
	t.Run("symlink inside the root is written through", func(t *testing.T) {
		dir := t.TempDir()
		put(t, dir, "srv/containerd.toml", "version = 2\n")
		os.MkdirAll(filepath.Join(dir, "etc/containerd"), 0o755)
		os.Symlink("/srv/containerd.toml", filepath.Join(dir, "etc/containerd/config.toml"))
		fsys := openRoot(t, dir)
		r := render(t, "kubeadm-qemu-snp", "kubeadm", 2)
		if _, err := Apply(fsys, r); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Lstat(filepath.Join(dir, "etc/containerd/config.toml")); fi.Mode()&fs.ModeSymlink == 0 {
			t.Error("the link was replaced by a file")
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "srv/containerd.toml")); !strings.Contains(string(b), "kubeadm-qemu-snp") {
			t.Error("the link target did not get the handler")
		}
		if _, err := Remove(fsys, r.Handler); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "srv/containerd.toml")); string(b) != "version = 2\n" {
			t.Errorf("not restored: %q", b)
		}
	})
	t.Run("file not berth's", func(t *testing.T) {
		dir := t.TempDir()
		put(t, dir, "etc/containerd/conf.d/berth-kata-qemu-snp.toml", "# mine\n")
		_, err := Apply(openRoot(t, dir), render(t, "kubeadm-qemu-snp", "kubeadm", 3))
		if err == nil || !strings.Contains(err.Error(), "not written by berth") {
			t.Errorf("foreign file: %v", err)
		}
	})
}

// faultFS fails writes after a budget of bytes (a full disk) or every
// open for writing (a read-only file system).
type faultFS struct {
	FS
	budget   int
	readOnly bool
}

type faultFile struct {
	WFile
	fs *faultFS
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (WFile, error) {
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 && f.readOnly {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EROFS}
	}
	w, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{WFile: w, fs: f}, nil
}

func (f *faultFile) Write(p []byte) (int, error) {
	if len(p) > f.fs.budget {
		n, _ := f.WFile.Write(p[:f.fs.budget])
		f.fs.budget = 0
		return n, syscall.ENOSPC
	}
	f.fs.budget -= len(p)
	return f.WFile.Write(p)
}

func (f *faultFS) MkdirAll(name string, perm fs.FileMode) error {
	if f.readOnly {
		return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.EROFS}
	}
	return f.FS.MkdirAll(name, perm)
}

// TestApplyFullDiskAndReadOnly: whatever fails, nothing is half-written:
// originals intact, no temporary files, no state.
func TestApplyFullDiskAndReadOnly(t *testing.T) {
	r := render(t, "kubeadm-qemu-snp", "kubeadm", 2)
	total := 0
	for _, f := range r.Host {
		total += len(f.Content)
	}
	for _, tc := range []struct {
		name string
		fs   func(FS) FS
		want error
	}{
		{"disk full at once", func(b FS) FS { return &faultFS{FS: b, budget: 0} }, syscall.ENOSPC},
		{"disk full midway", func(b FS) FS { return &faultFS{FS: b, budget: total / 2} }, syscall.ENOSPC},
		{"disk full at the state file", func(b FS) FS { return &faultFS{FS: b, budget: total + len(v2Main) + 100} }, syscall.ENOSPC},
		{"read-only", func(b FS) FS { return &faultFS{FS: b, budget: 1 << 30, readOnly: true} }, syscall.EROFS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			put(t, dir, "etc/containerd/config.toml", v2Main)
			before := readTree(t, dir)
			_, err := Apply(tc.fs(openRoot(t, dir)), r)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if after := readTree(t, dir); !maps.Equal(contents(after), contents(before)) {
				t.Errorf("files changed or left behind: %v", contents(after))
			}
		})
	}
}
