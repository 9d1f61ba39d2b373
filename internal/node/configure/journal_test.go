package configure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/fileruntime"
)

// errDead is what a killed process would have done: nothing.
var errDead = errors.New("killed")

// dyingFS is an OSRoot whose process is killed at a named step: from then
// on nothing it would write reaches the disk, as after a SIGKILL (no
// deferred cleanup, no rollback), while reads still answer so that the
// code runs on to its end.
type dyingFS struct {
	*OSRoot
	dead bool
}

func (d *dyingFS) MkdirAll(name string, p fs.FileMode) error {
	if d.dead {
		return errDead
	}
	return d.OSRoot.MkdirAll(name, p)
}

func (d *dyingFS) OpenFile(name string, flag int, perm fs.FileMode) (WFile, error) {
	if d.dead && flag != os.O_RDONLY {
		return nil, errDead
	}
	return d.OSRoot.OpenFile(name, flag, perm)
}

func (d *dyingFS) Rename(o, n string) error {
	if d.dead {
		return errDead
	}
	return d.OSRoot.Rename(o, n)
}

func (d *dyingFS) Remove(name string) error {
	if d.dead {
		return errDead
	}
	return d.OSRoot.Remove(name)
}

// noLeftovers fails when a temporary file or the journal is left in dir.
func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && (isBerthTemp(e.Name()) || strings.HasSuffix(p, IntentPath)) {
			t.Errorf("left behind: %s", p)
		}
		return nil
	})
}

// killCase is one command killed at each of its steps.
type killCase struct {
	plat, layout string
	v            int
	main         string
	restart      bool
}

// TestKillAtEveryStep kills an apply and a remove (with and without a
// restart) at every step they name, then checks that one ordinary run of
// the same command converges to what a clean run leaves (the handler
// live or gone in the runtime), with no temporary file or journal left,
// and that a remove after any killed apply restores the original byte for
// byte.
func TestKillAtEveryStep(t *testing.T) {
	cases := []killCase{
		{"kubeadm-qemu-snp", "kubeadm", 2, v2Main, false},
		{"kubeadm-qemu-none", "kubeadm", 2, v2Main, true},
		{"kubeadm-qemu-none", "kubeadm", 3, "version = 3\n", true},
		{"kubeadm-qemu-tdx", "kubeadm", 3, "version = 3\n", false},
	}
	kills := 0
	for _, tc := range cases {
		name := fmt.Sprintf("%s-v%d-restart=%v", tc.plat, tc.v, tc.restart)
		t.Run(name, func(t *testing.T) {
			r := render(t, tc.plat, tc.layout, tc.v)
			setup := func(t *testing.T) (string, *dyingFS, *fileruntime.Containerd) {
				dir := t.TempDir()
				put(t, dir, "etc/containerd/config.toml", tc.main)
				rt := &fileruntime.Containerd{Root: dir}
				if err := rt.Restart(context.Background()); err != nil {
					t.Fatal(err)
				}
				fsys := &dyingFS{OSRoot: openRoot(t, dir)}
				rt.Gone = func() bool { return fsys.dead }
				return dir, fsys, rt
			}
			apply := func(fsys FS, rt *fileruntime.Containerd, opts ...Option) (*Result, error) {
				if !tc.restart {
					return Apply(fsys, r, opts...)
				}
				res, err := ApplyLive(context.Background(), fsys, r, rt, opts...)
				if res == nil {
					return nil, err
				}
				return res.Result, err
			}
			remove := func(fsys FS, rt *fileruntime.Containerd, opts ...Option) (*Result, error) {
				if !tc.restart {
					return Remove(fsys, r.Handler, opts...)
				}
				res, err := RemoveLive(context.Background(), fsys, r.Handler, rt, opts...)
				if res == nil {
					return nil, err
				}
				return res.Result, err
			}
			// A clean run: its steps, and the trees it leaves.
			dir, fsys, rt := setup(t)
			orig := contents(readTree(t, dir))
			var applySteps, removeSteps []string
			if _, err := apply(fsys, rt, WithStep(func(s string) { applySteps = append(applySteps, s) })); err != nil {
				t.Fatal(err)
			}
			applied := contents(readTree(t, dir))
			if tc.restart && !slices.Contains(rt.Loaded, r.Handler) {
				t.Fatalf("clean apply: runtime has %v", rt.Loaded)
			}
			if _, err := remove(fsys, rt, WithStep(func(s string) { removeSteps = append(removeSteps, s) })); err != nil {
				t.Fatal(err)
			}
			if got := contents(readTree(t, dir)); !maps.Equal(got, orig) {
				t.Fatalf("clean remove did not restore the original:\n%v", got)
			}
			t.Logf("apply steps %q, remove steps %q", applySteps, removeSteps)

			for _, step := range applySteps {
				t.Run("apply killed at "+step, func(t *testing.T) {
					for _, then := range []string{"apply", "remove"} {
						dir, fsys, rt := setup(t)
						apply(fsys, rt, WithStep(func(s string) {
							if s == step {
								fsys.dead = true
							}
						}))
						kills++
						fsys.dead = false
						switch then {
						case "apply":
							if _, err := apply(fsys, rt); err != nil {
								t.Fatalf("the next apply: %v", err)
							}
							if got := contents(readTree(t, dir)); !maps.Equal(got, applied) {
								t.Errorf("the next apply left a different tree:\n%s", treeDiff(got, applied))
							}
							if tc.restart && !slices.Contains(rt.Loaded, r.Handler) {
								t.Errorf("the next apply left the runtime with %v", rt.Loaded)
							}
						case "remove":
							if _, err := remove(fsys, rt); err != nil {
								t.Fatalf("a remove after the kill: %v", err)
							}
							if got := contents(readTree(t, dir)); !maps.Equal(got, orig) {
								t.Errorf("remove after the kill left a tree other than the original:\n%s", treeDiff(got, orig))
							}
							if tc.restart && slices.Contains(rt.Loaded, r.Handler) {
								t.Errorf("remove left the runtime with %v", rt.Loaded)
							}
						}
						noLeftovers(t, dir)
					}
				})
			}
			for _, step := range removeSteps {
				t.Run("remove killed at "+step, func(t *testing.T) {
					dir, fsys, rt := setup(t)
					if _, err := apply(fsys, rt); err != nil {
						t.Fatal(err)
					}
					remove(fsys, rt, WithStep(func(s string) {
						if s == step {
							fsys.dead = true
						}
					}))
					kills++
					fsys.dead = false
					if _, err := remove(fsys, rt); err != nil {
						t.Fatalf("the next remove: %v", err)
					}
					if got := contents(readTree(t, dir)); !maps.Equal(got, orig) {
						t.Errorf("the next remove left a tree other than the original:\n%s", treeDiff(got, orig))
					}
					if tc.restart && slices.Contains(rt.Loaded, r.Handler) {
						t.Errorf("the next remove left the runtime with %v", rt.Loaded)
					}
					noLeftovers(t, dir)
				})
			}
		})
	}
	t.Logf("%d kills", kills)
}

// treeDiff lists the files that differ between two trees.
func treeDiff(got, want map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if w, ok := want[k]; !ok {
			fmt.Fprintf(&b, "  extra %s\n", k)
		} else if w != got[k] {
			fmt.Fprintf(&b, "  differs %s:\n%s\n  want:\n%s\n", k, got[k], w)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok {
			fmt.Fprintf(&b, "  missing %s\n", k)
		}
	}
	return b.String()
}

// TestRestartWithNothingToChange: files already in place (a run killed
// before its restart, or an apply without --restart) are still restarted
// into and proven by the next --restart; once live, nothing restarts.
func TestRestartWithNothingToChange(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	put(t, dir, "etc/containerd/config.toml", v2Main)
	rt := &fileruntime.Containerd{Root: dir}
	rt.Restart(ctx)
	fsys := openRoot(t, dir)
	r := render(t, "kubeadm-qemu-none", "kubeadm", 2)
	if _, err := Apply(fsys, r); err != nil {
		t.Fatal(err)
	}
	res, err := ApplyLive(ctx, fsys, r, rt)
	if err != nil || !res.Restarted || len(res.Changed) != 0 || !slices.Contains(rt.Loaded, r.Handler) {
		t.Fatalf("apply --restart on files in place: %+v %v; runtime has %v", res, err, rt.Loaded)
	}
	n := rt.Restarts
	if res, err := ApplyLive(ctx, fsys, r, rt); err != nil || res.Restarted || rt.Restarts != n {
		t.Errorf("apply --restart with the handler live restarted: %+v %v", res, err)
	}
	if _, err := Remove(fsys, r.Handler); err != nil {
		t.Fatal(err)
	}
	res, err = RemoveLive(ctx, fsys, r.Handler, rt)
	if err != nil || !res.Restarted || slices.Contains(rt.Loaded, r.Handler) {
		t.Fatalf("remove --restart on files gone: %+v %v; runtime has %v", res, err, rt.Loaded)
	}
	n = rt.Restarts
	if res, err := RemoveLive(ctx, fsys, r.Handler, rt); err != nil || res.Restarted || rt.Restarts != n {
		t.Errorf("remove --restart with the handler gone restarted: %+v %v", res, err)
	}
}

// TestLoadCheckBeforeRestart: a configuration that would not load is
// never restarted into: refused before anything changed when it is not
// berth's change that breaks it, rolled back before the restart when it
// is.
func TestLoadCheckBeforeRestart(t *testing.T) {
	ctx := context.Background()
	r := render(t, "kubeadm-qemu-none", "kubeadm", 2)
	for _, tc := range []struct {
		name   string
		refuse func(root string) error
		says   string
	}{
		{"the current configuration", func(string) error {
			return errors.New("etc/containerd/conf.d/other.toml:3: broken")
		}, "without any change by berth"},
		{"only with berth's change", func(root string) error {
			if _, err := os.Stat(filepath.Join(root, "opt/berth/etc/kata/kubeadm-qemu-none.toml")); err == nil {
				return errors.New("berth's block: broken")
			}
			return nil
		}, "with berth's change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			put(t, dir, "etc/containerd/config.toml", v2Main)
			rt := &fileruntime.Containerd{Root: dir}
			rt.Restart(ctx)
			before := contents(readTree(t, dir))
			rt.Refuse = tc.refuse
			_, err := ApplyLive(ctx, openRoot(t, dir), r, rt)
			if !IsRefused(err) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "broken") {
				t.Fatalf("apply --restart: %v", err)
			}
			t.Logf("refusal: %v", err)
			if rt.Restarts != 1 {
				t.Errorf("containerd restarted %d times", rt.Restarts-1)
			}
			if got := contents(readTree(t, dir)); !maps.Equal(got, before) {
				t.Errorf("files changed:\n%s", treeDiff(got, before))
			}
		})
	}
}
