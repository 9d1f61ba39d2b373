package hostfs

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit"
)

type tarEntry struct {
	name, target string
	typ          byte
	data         string
	size         int64
}

func writeTarGz(t *testing.T, entries []tarEntry) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.tar.gz")
	if err := os.WriteFile(p, tarGz(entries), 0o644); err != nil {
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
	testkit.NeedsRoot(t, "TestLiveRunChroot (chroot)")
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

// TestSnapshotIndexMarks: files the snapshot index lists as truncated or
// special read as they did on the host, by whatever path.
func TestSnapshotIndexMarks(t *testing.T) {
	file := writeTarGz(t, []tarEntry{
		{name: "etc/big.conf", typ: tar.TypeReg, data: "abc"},
		{name: "etc/link", typ: tar.TypeSymlink, target: "/etc/big.conf"},
		{name: "proc/cpuinfo", typ: tar.TypeReg},
		{name: "etc/ok", typ: tar.TypeReg, data: "ok"},
		{name: SnapshotIndex, typ: tar.TypeReg, data: `{"schemaVersion":1,
			"truncated":[{"path":"etc/big.conf","kept":3,"size":10},{"path":"../../x","kept":1},{"path":"nope","kept":1}],
			"special":[{"path":"proc/cpuinfo","kind":"FIFO"}]}`},
	})
	root, cleanup, err := Open(file, false)
	defer cleanup()
	if err != nil {
		t.Fatal(err)
	}
	var te *TruncatedError
	for _, p := range []string{"etc/big.conf", "etc/link"} {
		if _, err := root.FS().ReadFile(p); !errors.As(err, &te) || te.Kept != 3 || te.Size != 10 {
			t.Errorf("ReadFile(%s) = %v, want truncated in snapshot (3 of 10 bytes)", p, err)
		}
		if _, err := root.FS().Open(p); !errors.Is(err, ErrTruncated) {
			t.Errorf("Open(%s) = %v, want ErrTruncated", p, err)
		}
	}
	var nr *NotRegularError
	if _, err := root.FS().ReadFile("proc/cpuinfo"); !errors.As(err, &nr) || nr.Kind != "FIFO" {
		t.Errorf("ReadFile(proc/cpuinfo) = %v, want not a regular file: FIFO", err)
	}
	if _, err := root.FS().Stat("proc/cpuinfo"); err != nil {
		t.Errorf("Stat of a special placeholder: %v", err)
	}
	if b, err := root.FS().ReadFile("etc/ok"); err != nil || string(b) != "ok" {
		t.Errorf("etc/ok: %q %v", b, err)
	}
	bad := writeTarGz(t, []tarEntry{{name: SnapshotIndex, typ: tar.TypeReg, data: "{"}})
	if _, c, err := Open(bad, false); err == nil || !strings.Contains(err.Error(), SnapshotIndex) {
		c()
		t.Errorf("a malformed index was accepted: %v", err)
	}
}

// TestRecorderMarks: the recorder says what it cut and what was special,
// and caps recorded command outputs.
func TestRecorderMarks(t *testing.T) {
	dir := t.TempDir()
	mkTree(t, dir, map[string]string{
		"f":      "0123456789",
		"g":      "0123456789",
		"d/":     "",
		"l":      "-> /f",
		"up":     "-> ../../../../../../../../f",
		"pipe/":  "",
		"stream": "0123456789",
		".berth/recorded.json": `{"schemaVersion":1,"commands":[{"argv":["/bin/x"],"stdout":"` +
			strings.Repeat("y", maxOutput+10) + `","exitCode":0}]}`,
	})
	mkSpecial(t, filepath.Join(dir, "pipe/p"), "", "")
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(d)
	r.MaxFile = 4
	if b, err := r.FS().ReadFile("l"); err != nil || string(b) != "0123456789" {
		t.Fatalf("read through the recorder: %q %v (discovery sees the whole file)", b, err)
	}
	if _, err := ReadFileLimit(r.FS(), "g", 5); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFileLimit: %v", err)
	}
	if _, err := r.FS().ReadFile("pipe/p"); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("fifo: %v", err)
	}
	if _, err := r.FS().ReadFile("d"); err == nil {
		t.Fatal("read a directory")
	}
	if b, err := r.FS().ReadFile("up"); err != nil || string(b) != "0123456789" {
		t.Fatalf("a link climbing out of the root stops at the root: %q %v", b, err)
	}
	f, err := r.FS().Open("stream")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(f)
	f.Close()
	res, err := r.Run(context.Background(), "/bin/x")
	if err != nil || len(res.Stdout) != maxOutput+len(truncatedMark) {
		t.Errorf("recorded output not capped on load: %d bytes, %v", len(res.Stdout), err)
	}
	c := r.Capture()
	got := map[string]Entry{}
	for _, e := range c.Entries {
		got[e.Path] = e
	}
	if e := got["f"]; !e.Truncated || e.Size != 10 || string(e.Data) != "0123" {
		t.Errorf("f: %+v, want 4 bytes kept of 10, truncated", e)
	}
	if e := got["l"]; e.Kind != KindSymlink || e.Target != "/f" {
		t.Errorf("l: %+v", e)
	}
	if e := got["up"]; e.Kind != KindSymlink {
		t.Errorf("up: %+v", e)
	}
	if e := got["g"]; !e.Truncated || !e.Read || len(e.Data) != 0 || e.Size != 10 {
		t.Errorf("g (over the cap of its read): %+v, want an empty truncated entry", e)
	}
	if e := got["pipe/p"]; !e.Special || e.SpecialKind != "FIFO" {
		t.Errorf("pipe/p: %+v, want a FIFO placeholder", e)
	}
	if e := got["d"]; e.Kind != KindDir {
		t.Errorf("d: %+v, want a directory", e)
	}
	if e := got["stream"]; !e.Truncated || string(e.Data) != "0123" {
		t.Errorf("stream: %+v, want 4 bytes kept, truncated", e)
	}
	if len(c.Recorded.Commands) != 1 || len(c.Recorded.Commands[0].Stdout) != maxOutput+len(truncatedMark) {
		t.Errorf("recorded command output not capped")
	}
}

// TestSnapshotLinkTarget: links of a host root are stored so that the
// snapshot accepts them and they resolve as under chroot semantics.
func TestSnapshotLinkTarget(t *testing.T) {
	for _, tt := range []struct{ name, target, want string }{
		{"etc/os-release", "/usr/lib/os-release", "/usr/lib/os-release"},
		{"sys/class/net/eth0", "../../devices/pci0000:00/net/eth0", "../../devices/pci0000:00/net/eth0"},
		{"sys/class/dmi/id/x", "../../../../../../../../etc/shadow", "/etc/shadow"},
		{"a/l", "../../etc", "/etc"},
		{"l", "/x/../../etc", "/etc"},
		{"l", "..", "/"},
		{"a/b", "../c/../../../d/./e", "/d/e"},
	} {
		got := SnapshotLinkTarget(tt.name, tt.target)
		if got != tt.want {
			t.Errorf("SnapshotLinkTarget(%q, %q) = %q, want %q", tt.name, tt.target, got, tt.want)
		}
		if _, err := inRootTarget(tt.name, got); err != nil {
			t.Errorf("%q -> %q: refused by ExtractSnapshot: %v", tt.name, got, err)
		}
	}
}
