package snapshot

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testhosts"
)

const hostsDir = "../../../testdata/hosts"

func fixedNow() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }

// comparable renders facts without the fields that name the root.
func comparable(t *testing.T, f *facts.Facts) string {
	t.Helper()
	g := *f
	g.Root, g.Live, g.CollectedAt = "", false, time.Time{}
	b, err := json.MarshalIndent(&g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRoundTrip discovers every fixture through a recording root, writes
// the snapshot, opens it and discovers again: the facts must be the same.
func TestRoundTrip(t *testing.T) {
	for _, name := range testhosts.Names(t) {
		t.Run(name, func(t *testing.T) {
			root, err := hostfs.OpenDir(filepath.Join(hostsDir, name))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			opt := Options{Now: fixedNow, Discover: discover.Options{Now: fixedNow}}
			before, m, err := Take(context.Background(), root, &buf, opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Files) == 0 || len(m.Listings) == 0 {
				t.Fatalf("manifest captured nothing: %+v", m)
			}
			file := filepath.Join(t.TempDir(), "snap.tar.gz")
			if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			snap, cleanup, err := hostfs.Open(file, false)
			defer cleanup()
			if err != nil {
				t.Fatal(err)
			}
			if snap.Live() || snap.Path() != file {
				t.Errorf("snapshot root live=%v path=%q", snap.Live(), snap.Path())
			}
			after := discover.Run(context.Background(), snap, discover.Options{Now: fixedNow})
			if a, b := comparable(t, before), comparable(t, after); a != b {
				t.Errorf("facts differ after the round trip:\n%s", lineDiff(a, b))
			}
			if _, err := snap.FS().ReadFile(ManifestPath); err != nil {
				t.Errorf("no manifest: %v", err)
			}
		})
	}
}

// lineDiff shows the first differing lines.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, "- "+x, "+ "+y)
			if len(out) > 20 {
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

func TestRedact(t *testing.T) {
	tests := []struct {
		path, in string
		wantGone []string
		wantKept []string
	}{
		{
			path: "etc/containerd/config.toml",
			in: `version = 2
[plugins."io.containerd.grpc.v1.cri".registry.configs."reg.example".auth]
  username = "alice"
  password = "s3cret"
  auth = "YWxpY2U6czNjcmV0"
  identitytoken = "tok"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
  runtime_type = "io.containerd.kata.v2"
  username_hint = "keep"
`,
			wantGone: []string{"alice", "s3cret", "YWxpY2U6czNjcmV0", `"tok"`},
			wantKept: []string{"runtime_type", "io.containerd.kata.v2", "username_hint = \"keep\""},
		},
		{
			path:     "etc/containers/registries.conf",
			in:       "[[registry]]\nlocation = \"quay.io\"\n[registry.auth]\ntoken = \"abc\"\n",
			wantGone: []string{`"abc"`},
			wantKept: []string{`location = "quay.io"`},
		},
		{
			path:     "etc/containerd/config.toml",
			in:       "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs]\n  \"r\" = { auth = { username = \"u\", password = \"p\" } }\n",
			wantGone: []string{`"u"`, `"p"`},
		},
		{
			path:     "etc/kubernetes/kubelet.conf",
			in:       "users:\n- name: x\n  user:\n    client-key-data: LS0tLS1\n    token: abc\n",
			wantGone: []string{"LS0tLS1", "abc"},
		},
		{
			path:     "etc/ssl/x.pem",
			in:       "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
			wantGone: []string{"MIIE"},
		},
		{
			path:     "proc/cpuinfo",
			in:       "password = kernel data is never touched\n",
			wantKept: []string{"kernel data"},
		},
	}
	for _, tt := range tests {
		got, _ := Redact(tt.path, []byte(tt.in))
		for _, s := range tt.wantGone {
			if strings.Contains(string(got), s) {
				t.Errorf("%s: %q survived redaction:\n%s", tt.path, s, got)
			}
		}
		for _, s := range tt.wantKept {
			if !strings.Contains(string(got), s) {
				t.Errorf("%s: %q lost:\n%s", tt.path, s, got)
			}
		}
	}
}

// TestNothingRunnable: a snapshot of a root with executables carries none.
func TestNothingRunnable(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/bin/qemu-system-x86_64"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, _, err := Take(context.Background(), root, &buf, Options{Now: fixedNow, Discover: discover.Options{Now: fixedNow}}); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	seen := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Mode&0o111 != 0 {
			t.Errorf("%s has mode %o: snapshots must carry nothing runnable", h.Name, h.Mode)
		}
		seen = seen || h.Name == "usr/bin/qemu-system-x86_64"
	}
	if !seen {
		t.Error("the binary discovery found is not in the snapshot")
	}
}

// TestTruncatedInIndex: a file discovery read further than a snapshot
// keeps of one file is listed in the index as truncated, and discovery of
// the snapshot reports the fact as unknown ("truncated in snapshot")
// instead of parsing a part of it.
func TestTruncatedInIndex(t *testing.T) {
	dir := t.TempDir()
	dmesg := filepath.Join(dir, "dmesg")
	big := bytes.Repeat([]byte("[    0.000000] kvm: nothing to see\n"), (hostfs.DefaultMaxRecordedFile/35)+1000)
	if err := os.WriteFile(dmesg, big, 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	before, m, err := Take(context.Background(), root, &buf, Options{Now: fixedNow, Discover: discover.Options{Now: fixedNow}})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := before.UnknownReason("kernel.bootLog"); ok {
		t.Fatalf("the host's boot log is unknown: %s", r)
	}
	want := hostfs.TruncatedFile{Path: "dmesg", Kept: hostfs.DefaultMaxRecordedFile, Size: int64(len(big))}
	if len(m.Truncated) != 1 || m.Truncated[0] != want {
		t.Fatalf("manifest truncated = %+v, want %+v", m.Truncated, want)
	}
	after := rediscover(t, buf.Bytes())
	r, _ := after.UnknownReason("kernel.bootLog")
	if !strings.HasPrefix(r, "truncated in snapshot: dmesg (8388608 of ") {
		t.Errorf("kernel.bootLog of the snapshot: %q, want truncated in snapshot", r)
	}
}

// TestRecordedOutputsCapped: a command output recorded into a snapshot
// is capped like a live one.
func TestRecordedOutputsCapped(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".berth"), 0o755); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("v", 1<<20)
	rec := `{"schemaVersion":1,"commands":[{"argv":["/usr/bin/qemu-system-x86_64","--version"],"stdout":"` + huge + `","exitCode":0}]}`
	if err := os.WriteFile(filepath.Join(dir, hostfs.RecordedFile), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := hostfs.NewRecorder(root)
	res, err := r.Run(context.Background(), "/usr/bin/qemu-system-x86_64", "--version")
	if err != nil || len(res.Stdout) > 65<<10 || !strings.HasSuffix(res.Stdout, "[output truncated]") {
		t.Fatalf("output of %d bytes, %v", len(res.Stdout), err)
	}
	c := r.Capture()
	if len(c.Recorded.Commands) != 1 || len(c.Recorded.Commands[0].Stdout) > 65<<10 {
		t.Errorf("recorded output not capped")
	}
}
