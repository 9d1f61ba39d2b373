package hostfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type tarEntry struct {
	name, target string
	typ          byte
	data         string
	size         int64
}

func writeTarGz(t *testing.T, entries []tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		size := int64(len(e.data))
		if e.size != 0 {
			size = e.size
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.target, Size: size, Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.data))
		}
	}
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), "s.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOpenSnapshotRefuses(t *testing.T) {
	notGzip := filepath.Join(t.TempDir(), "x.tar.gz")
	os.WriteFile(notGzip, []byte("hello"), 0o644)
	tests := []struct {
		name    string
		file    string
		wantErr string
	}{
		{"not gzip", notGzip, "gzip"},
		{"absolute", writeTarGz(t, []tarEntry{{name: "/etc/passwd", typ: tar.TypeReg, data: "x"}}), "absolute path"},
		{"dotdot", writeTarGz(t, []tarEntry{{name: "a/../../x", typ: tar.TypeReg, data: "x"}}), `".."`},
		{"symlink escape", writeTarGz(t, []tarEntry{{name: "a/l", typ: tar.TypeSymlink, target: "../../etc"}}), "leaves the snapshot"},
		{"absolute symlink escape", writeTarGz(t, []tarEntry{{name: "l", typ: tar.TypeSymlink, target: "/x/../../etc"}}), "leaves the snapshot"},
		{"hardlink escape", writeTarGz(t, []tarEntry{{name: "h", typ: tar.TypeLink, target: "../etc/passwd"}}), "leaves the snapshot"},
		{"device", writeTarGz(t, []tarEntry{{name: "dev/kvm", typ: tar.TypeChar}}), "device nodes"},
		{"write through symlink", writeTarGz(t, []tarEntry{{name: "d", typ: tar.TypeSymlink, target: "."}, {name: "d/../../x", typ: tar.TypeReg, data: "x"}}), `".."`},
		{"empty", writeTarGz(t, nil), "empty archive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cleanup, err := Open(tt.file, false)
			cleanup()
			if err == nil || !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Open = %v, want ErrBadSnapshot mentioning %q", err, tt.wantErr)
			}
		})
	}
	big := writeTarGz(t, []tarEntry{{name: "a", typ: tar.TypeReg, data: strings.Repeat("x", 2048)}})
	if _, c, err := OpenSnapshot(big, SnapshotLimits{MaxBytes: 1024}); err == nil || !strings.Contains(err.Error(), "exceeds") {
		c()
		t.Fatalf("size cap not enforced: %v", err)
	}
}

func TestOpenSnapshotServesInside(t *testing.T) {
	file := writeTarGz(t, []tarEntry{
		{name: "usr/lib/os-release", typ: tar.TypeReg, data: "ID=test\n"},
		{name: "etc/os-release", typ: tar.TypeSymlink, target: "/usr/lib/os-release"},
		{name: "etc/hosts", typ: tar.TypeLink, target: "usr/lib/os-release"},
		{name: ".berth/recorded.json", typ: tar.TypeReg, data: `{"schemaVersion":1,"commands":[{"argv":["/bin/x","--version"],"stdout":"x 1.0","exitCode":0}]}`},
	})
	root, cleanup, err := Open(file, false)
	defer cleanup()
	if err != nil {
		t.Fatal(err)
	}
	b, err := root.FS().ReadFile("etc/os-release")
	if err != nil || string(b) != "ID=test\n" {
		t.Fatalf("absolute symlink not served inside the snapshot: %q %v", b, err)
	}
	res, err := root.Run(context.Background(), "/bin/x", "--version")
	if err != nil || res.Stdout != "x 1.0" || !res.Recorded {
		t.Fatalf("recorded command: %+v %v", res, err)
	}
	if _, err := root.Run(context.Background(), "/bin/y"); !errors.Is(err, ErrOffline) {
		t.Fatalf("unrecorded command: %v", err)
	}
	if _, _, err := Open(file, true); err == nil {
		t.Fatal("--live with a snapshot file accepted")
	}
}

func TestOpenKinds(t *testing.T) {
	r, c, err := Open("/", false)
	c()
	if err != nil || !r.Live() || r.Path() != "/" {
		t.Fatalf("/: %v %v", r, err)
	}
	dir := t.TempDir()
	r, c, err = Open(dir, false)
	c()
	if err != nil || r.Live() {
		t.Fatalf("dir: %v", err)
	}
	r, c, err = Open(dir, true)
	c()
	if err != nil || !r.Live() {
		t.Fatalf("dir --live: %v", err)
	}
	if _, c, err := Open(filepath.Join(dir, "nope"), false); err == nil {
		c()
		t.Fatal("missing root accepted")
	}
}

func TestLiveRun(t *testing.T) {
	l, err := NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := l.Run(ctx, "/usr/bin/env")
	if err != nil || strings.TrimSpace(res.Stdout) != strings.Join(commandEnv(), "\n") {
		t.Errorf("env = %q, %v; want only the minimal environment", res.Stdout, err)
	}
	res, err = l.Run(ctx, "/bin/cat")
	if err != nil || res.Stdout != "" || res.ExitCode != 0 {
		t.Errorf("cat with closed stdin: %+v %v", res, err)
	}
	res, err = l.Run(ctx, "/bin/sh", "-c", "exit 3")
	if err != nil || res.ExitCode != 3 {
		t.Errorf("exit code: %+v %v", res, err)
	}
	for _, bad := range [][]string{{"sh"}, {"/bin/../bin/sh"}, {}} {
		if _, err := l.Run(ctx, bad...); err == nil {
			t.Errorf("Run(%q) accepted", bad)
		}
	}
	// The timeout kills the command and its children: Run returns long
	// before the 30 s sleeps would end, however loaded the machine is.
	l.Timeout = 200 * time.Millisecond
	start := time.Now()
	res, err = l.Run(ctx, "/bin/sh", "-c", "sleep 30 & sleep 30")
	if err == nil || !strings.Contains(res.Error, "timed out") || time.Since(start) > 20*time.Second {
		t.Errorf("timeout: %+v %v after %s", res, err, time.Since(start))
	}
	// The output cap is not a timeout case: under load 200 ms may end the
	// command before it wrote anything.
	l.Timeout = 0
	res, _ = l.Run(ctx, "/bin/sh", "-c", "head -c 200000 /dev/zero | tr '\\0' x")
	if len(res.Stdout) > maxOutput+100 || !strings.HasSuffix(res.Stdout, "[output truncated]") {
		t.Errorf("output not capped: %d bytes", len(res.Stdout))
	}
}

// TestLiveRunChroot checks that a command of a mounted host resolves
// inside it: the build machine's /bin/sh must not answer for a root that
// has none.
func TestLiveRunChroot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestLiveRunChroot needs root (chroot); run the suite as root as CI does")
	}
	l, err := NewLive(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Run(context.Background(), "/bin/sh", "-c", "true"); err == nil {
		t.Fatal("/bin/sh of the build machine ran for an empty mounted root")
	}
}

func TestRecorder(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "sys/devices/virtual/dmi/id"), 0o755)
	os.WriteFile(filepath.Join(dir, "sys/devices/virtual/dmi/id/sys_vendor"), []byte("QEMU\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "sys/class/dmi"), 0o755)
	os.Symlink("../../devices/virtual/dmi/id", filepath.Join(dir, "sys/class/dmi/id"))
	os.WriteFile(filepath.Join(dir, "sys/class/dmi/other"), []byte("unread"), 0o644)
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(d)
	if b, err := r.FS().ReadFile("sys/class/dmi/id/sys_vendor"); err != nil || string(b) != "QEMU\n" {
		t.Fatal(err)
	}
	if _, err := r.FS().ReadDir("sys/class/dmi"); err != nil {
		t.Fatal(err)
	}
	RecordProbe(r, "kvm", map[string]int{"api": 12})
	c := r.Capture()
	got := map[string]Entry{}
	for _, e := range c.Entries {
		got[e.Path] = e
	}
	if e := got["sys/devices/virtual/dmi/id/sys_vendor"]; !e.Read || string(e.Data) != "QEMU\n" {
		t.Errorf("file not captured under its resolved path: %+v", got)
	}
	if e := got["sys/class/dmi/id"]; e.Kind != KindSymlink || e.Target != "../../devices/virtual/dmi/id" {
		t.Errorf("symlink not captured: %+v", e)
	}
	if e := got["sys/class/dmi/other"]; e.Kind != KindFile || e.Read {
		t.Errorf("listed file should be a placeholder: %+v", e)
	}
	if string(c.Recorded.Probes["kvm"]) != `{"api":12}` || len(c.Listings) != 1 {
		t.Errorf("probes %s listings %v", c.Recorded.Probes["kvm"], c.Listings)
	}
}
