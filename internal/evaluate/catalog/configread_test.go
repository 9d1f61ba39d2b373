package catalog_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/platform"
)

// deniedRoot fails every read of deny with EACCES, as the kernel does for
// a user without the permission (the tests run as root, which permission
// bits do not stop).
type deniedRoot struct {
	hostfs.Root
	deny string
}

func (r deniedRoot) FS() hostfs.FS { return deniedFS{r.Root.FS(), r.deny} }

type deniedFS struct {
	hostfs.FS
	deny string
}

func (d deniedFS) Open(name string) (fs.File, error) {
	if name == d.deny {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	}
	return d.FS.Open(name)
}

func (d deniedFS) ReadFile(name string) ([]byte, error) {
	if name == d.deny {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	}
	return d.FS.ReadFile(name)
}

// finding evaluates p on f and returns check id's finding.
func finding(t *testing.T, f *facts.Facts, p, id string) check.Finding {
	t.Helper()
	e, err := check.NewEvaluator(catalog.For(f))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := platform.Parse(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range e.Evaluate(f, []platform.Platform{pl}, check.Options{})[0].Findings {
		if fd.ID == id {
			return fd
		}
	}
	t.Fatalf("%s: no finding %s", p, id)
	return check.Finding{}
}

func evidence(fd check.Finding) string {
	var b strings.Builder
	for _, e := range fd.Evidence {
		b.WriteString(e.Field + "=" + e.Value + "\n")
	}
	return b.String()
}

// TestUnreadableConfigIsUnknown: a runtime configuration berth cannot read
// is UNKNOWN, with the read error as evidence, through discovery and the
// evaluator as berth check runs them; one that does not parse still fails
// with the syntax error.
func TestUnreadableConfigIsUnknown(t *testing.T) {
	const config = "etc/containerd/config.toml"
	tree := func(t *testing.T, files map[string]string) hostfs.Root {
		dir := t.TempDir()
		for p, c := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		root, err := hostfs.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return root
	}
	good := "version = 2\n"
	for _, tc := range []struct {
		name   string
		root   func(t *testing.T) hostfs.Root
		status check.Status
		want   string
	}{
		{"permission denied", func(t *testing.T) hostfs.Root {
			return deniedRoot{tree(t, map[string]string{"usr/bin/containerd": "", config: good}), config}
		}, check.Unknown, "permission denied: " + config},
		{"a directory where the file should be", func(t *testing.T) hostfs.Root {
			return tree(t, map[string]string{"usr/bin/containerd": "", config + "/x": ""})
		}, check.Unknown, "is a directory"},
		{"syntax error", func(t *testing.T) hostfs.Root {
			return tree(t, map[string]string{"usr/bin/containerd": "", config: "version = 2\n[plugins\n"})
		}, check.Fail, config + ":2"},
		{"readable", func(t *testing.T) hostfs.Root {
			return tree(t, map[string]string{"usr/bin/containerd": "", config: good})
		}, check.Pass, config + " parses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := discover.Run(context.Background(), tc.root(t), discover.Options{})
			if f.Runtimes.Containerd == nil {
				t.Fatalf("containerd not discovered: unknown %v", f.Unknown)
			}
			fd := finding(t, f, "kubeadm-qemu-none", "runtime.config.parse")
			got := fd.Message + "\n" + evidence(fd)
			if fd.Status != tc.status || !strings.Contains(got, tc.want) {
				t.Errorf("runtime.config.parse: %s %q, want %s with %q", fd.Status, got, tc.status, tc.want)
			}
			if tc.status == check.Unknown && strings.Contains(fd.Remedy, "syntax") {
				t.Errorf("an unreadable file is not a syntax error: remedy %q", fd.Remedy)
			}
		})
	}
}

// TestConfigReadErrorFacts is the same without discovery: the facts alone
// decide UNKNOWN (read error) or FAIL (parse error).
func TestConfigReadErrorFacts(t *testing.T) {
	base := func() *facts.Facts {
		return &facts.Facts{
			Distribution: facts.Distribution{Name: "kubeadm"},
			Runtimes: facts.Runtimes{Containerd: &facts.ContainerRuntime{Binary: "/usr/bin/containerd", Version: "2.1.4",
				ConfigPath: "etc/containerd/config.toml", ConfigExists: true}},
		}
	}
	f := base()
	f.Unknown = []facts.Missing{
		{Field: "runtimes.containerd.configError", Reason: "permission denied: etc/containerd/config.toml"},
		{Field: "runtimes.containerd.handlers", Reason: "permission denied: etc/containerd/config.toml"},
	}
	for _, id := range []string{"runtime.config.parse", "runtime.handler"} {
		fd := finding(t, f, "kubeadm-qemu-none", id)
		if fd.Status != check.Unknown || !strings.Contains(evidence(fd), "permission denied") {
			t.Errorf("%s with the config unreadable: %s %q", id, fd.Status, evidence(fd))
		}
	}
	f = base()
	f.Runtimes.Containerd.ConfigError = "etc/containerd/config.toml:2:8: expected ']'"
	f.Unknown = []facts.Missing{{Field: "runtimes.containerd.handlers", Reason: "unparseable: etc/containerd/config.toml:2:8"}}
	if fd := finding(t, f, "kubeadm-qemu-none", "runtime.config.parse"); fd.Status != check.Fail || !strings.Contains(fd.Message, ":2:8") {
		t.Errorf("with a syntax error: %s %q", fd.Status, fd.Message)
	}
}
