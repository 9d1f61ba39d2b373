package install

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// errKilled is what a killed install would have done: nothing.
var errKilled = errors.New("killed")

// killedFS is a host root whose install is killed at a step: from then on
// nothing it writes reaches the disk, as after a SIGKILL.
type killedFS struct {
	*configure.OSRoot
	dead bool
}

func (k *killedFS) MkdirAll(name string, p fs.FileMode) error {
	if k.dead {
		return errKilled
	}
	return k.OSRoot.MkdirAll(name, p)
}

func (k *killedFS) OpenFile(name string, flag int, perm fs.FileMode) (configure.WFile, error) {
	if k.dead && flag != os.O_RDONLY {
		return nil, errKilled
	}
	return k.OSRoot.OpenFile(name, flag, perm)
}

func (k *killedFS) Rename(o, n string) error {
	if k.dead {
		return errKilled
	}
	return k.OSRoot.Rename(o, n)
}

func (k *killedFS) Remove(name string) error {
	if k.dead {
		return errKilled
	}
	return k.OSRoot.Remove(name)
}

// fileContainerd loads its handlers from the root's main config and its
// imports at each restart, as containerd does; a restart asked by a
// killed install does not happen.
type fileContainerd struct {
	root   string
	loaded []string
	caller *killedFS
}

func (f *fileContainerd) Name() string { return "containerd.service" }
func (f *fileContainerd) Restart(context.Context) error {
	if f.caller.dead {
		return errKilled
	}
	l := runtimecfg.LoadContainerd(os.DirFS(f.root), "etc/containerd/config.toml", nil)
	if l.Config == nil || len(l.Errors) > 0 {
		f.loaded = nil
		return errors.Join(l.Errors...)
	}
	f.loaded = []string{"runc"}
	for _, h := range l.Config.Handlers {
		if h.Name != "runc" {
			f.loaded = append(f.loaded, h.Name)
		}
	}
	return nil
}
func (f *fileContainerd) Handlers(context.Context) ([]string, error) {
	if f.loaded == nil {
		return nil, errors.New("not answering")
	}
	return slices.Clone(f.loaded), nil
}
func (f *fileContainerd) Log(context.Context) string { return "" }

// tempDirs are the test's temporary directories, as the state lists the
// directories berth created on the way to the prefix.
var tempDirs = regexp.MustCompile(`TestInstallKilledBeforeRestartConverges[^/"]*`)

// TestInstallKilledBeforeRestartConverges: berth install --restart killed
// after the runtime configuration is written but before the runtime was
// restarted (and at every other step of its apply) converges on the next
// ordinary run: the handler live, the files as a clean install leaves
// them.
func TestInstallKilledBeforeRestartConverges(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	p := mustPlatform(t, "kubeadm-qemu-none")
	target := func(platform.Platform) (configure.Target, error) {
		return configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 2, Containerd: "1.7.0"}, nil
	}
	const main = "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n"
	// run installs p on a fresh host root, killed at step ("" for none),
	// then once more, and returns the root's runtime config tree.
	run := func(t *testing.T, step string) (map[string]string, []string) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "etc/containerd"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "etc/containerd/config.toml"), []byte(main), 0o644); err != nil {
			t.Fatal(err)
		}
		osr, err := configure.OpenOSRoot(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { osr.Close() })
		fsys := &killedFS{OSRoot: osr}
		rt := &fileContainerd{root: root, caller: fsys}
		rt.Restart(context.Background())
		w := workflow(t, &steps{}, rel.mirror(t))
		w.Restarter = nil
		rc := RuntimeConfig{FS: fsys, Target: target, Options: configure.Options{Paths: configure.Paths{Prefix: w.Installer.Layout.Prefix}},
			Runtime: func(context.Context, platform.Platform) (configure.Runtime, bool) { return rt, true }}
		for _, kill := range []string{step, ""} {
			rc.Change = []configure.Option{configure.WithStep(func(s string) {
				if s == kill {
					fsys.dead = true
				}
			})}
			w.Applier = rc
			pl, err := w.Plan(rel.m, []platform.Platform{p})
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.Run(context.Background(), pl)
			if kill == "" && err != nil {
				t.Fatalf("the install after the kill at %q: %v", step, err)
			}
			if (kill == "committed" || kill == "restarting") && slices.Contains(rt.loaded, p.Handler()) {
				t.Fatalf("killed at %s, the runtime was restarted anyway: the window was not reached", kill)
			}
			fsys.dead = false
		}
		if !slices.Contains(rt.loaded, p.Handler()) {
			t.Errorf("killed at %q, then installed again: the runtime has %v", step, rt.loaded)
		}
		// The prefix is a fresh directory per run: named alike.
		prefix := strings.TrimPrefix(w.Installer.Layout.Prefix, "/")
		tree := map[string]string{}
		filepath.WalkDir(filepath.Join(root), func(path string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				b, _ := os.ReadFile(path)
				rel, _ := filepath.Rel(root, path)
				tree[strings.ReplaceAll(rel, prefix, "PREFIX")] = tempDirs.ReplaceAllString(strings.ReplaceAll(string(b), prefix, "PREFIX"), "TMP")
			}
			return nil
		})
		return tree, rt.loaded
	}
	clean, _ := run(t, "")
	for _, step := range []string{"intent", "staged", "renamed etc/containerd/config.toml", "committed", "restarting", "restarted", "proven"} {
		t.Run(step, func(t *testing.T) {
			if got, _ := run(t, step); !maps.Equal(got, clean) {
				for _, k := range slices.Sorted(maps.Keys(got)) {
					if got[k] != clean[k] {
						t.Errorf("killed at %s, the next install left %s:\n%s\nwant\n%s", step, k, got[k], clean[k])
					}
				}
				for k := range clean {
					if _, ok := got[k]; !ok {
						t.Errorf("killed at %s, the next install left no %s", step, k)
					}
				}
			}
		})
	}
}
