package install

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/fileruntime"
	"berth.dev/berth/platform"
)

// killed is the panic a killed install unwinds with: nothing it would
// do after the step happens (the only deferred calls on the way release
// the lock and remove empty directories, as the kernel would release it).
type killed struct{}

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
		fsys, err := hostfs.OpenWritable(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fsys.Close() })
		rt := &fileruntime.Containerd{Root: root}
		rt.Restart(context.Background())
		w := workflow(t, &steps{}, rel.mirror(t))
		w.Restarter = nil
		rc := RuntimeConfig{FS: fsys, Target: target, Options: configure.Options{Paths: configure.Paths{Prefix: w.Installer.Layout.Prefix}},
			Runtime: func(context.Context, platform.Platform) (configure.Runtime, bool) { return rt, true }}
		for _, kill := range []string{step, ""} {
			rc.Change = []configure.Option{configure.WithStep(func(s string) {
				if s == kill {
					panic(killed{})
				}
			})}
			w.Applier = rc
			pl, err := w.Plan(rel.m, []platform.Platform{p})
			if err != nil {
				t.Fatal(err)
			}
			func() {
				defer func() {
					if r := recover(); r != nil && r != (killed{}) {
						panic(r)
					}
				}()
				_, err = w.Run(context.Background(), pl)
			}()
			if kill == "" && err != nil {
				t.Fatalf("the install after the kill at %q: %v", step, err)
			}
			if (kill == "committed" || kill == "restarting") && slices.Contains(rt.Loaded, p.Handler()) {
				t.Fatalf("killed at %s, the runtime was restarted anyway: the window was not reached", kill)
			}
		}
		if !slices.Contains(rt.Loaded, p.Handler()) {
			t.Errorf("killed at %q, then installed again: the runtime has %v", step, rt.Loaded)
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
		return tree, rt.Loaded
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
