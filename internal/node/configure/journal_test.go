package configure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/fileruntime"
	"berth.dev/berth/internal/testkit/treetest"
)

// errDead is what a killed process would have done: nothing.
var errDead = errors.New("killed")

// dyingFS is a hostfs.Writable whose process is killed at a named step: from then
// on nothing it would write reaches the disk, as after a SIGKILL (no
// deferred cleanup, no rollback), while reads still answer so that the
// code runs on to its end.
type dyingFS struct {
	*hostfs.Writable
	dead bool
}

func (d *dyingFS) MkdirAll(name string, p fs.FileMode) error {
	if d.dead {
		return errDead
	}
	return d.Writable.MkdirAll(name, p)
}

func (d *dyingFS) OpenFile(name string, flag int, perm fs.FileMode) (WFile, error) {
	if d.dead && flag != os.O_RDONLY {
		return nil, errDead
	}
	return d.Writable.OpenFile(name, flag, perm)
}

func (d *dyingFS) Rename(o, n string) error {
	if d.dead {
		return errDead
	}
	return d.Writable.Rename(o, n)
}

func (d *dyingFS) Remove(name string) error {
	if d.dead {
		return errDead
	}
	return d.Writable.Remove(name)
}

// leftover is a file a run must not leave behind: a temporary file or
// the journal of an unfinished change.
func leftover(rel string) bool { return isBerthTemp(path.Base(rel)) || rel == IntentPath }

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
				fsys := &dyingFS{Writable: openRoot(t, dir)}
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
			orig := treetest.Content(t, dir)
			var applySteps, removeSteps []string
			if _, err := apply(fsys, rt, WithStep(func(s string) { applySteps = append(applySteps, s) })); err != nil {
				t.Fatal(err)
			}
			applied := treetest.Content(t, dir)
			if _, err := remove(fsys, rt, WithStep(func(s string) { removeSteps = append(removeSteps, s) })); err != nil {
				t.Fatal(err)
			}
			if got := treetest.Content(t, dir); got != orig {
				t.Fatalf("clean remove did not restore the original:\n%s", got)
			}
			t.Logf("apply steps %q, remove steps %q", applySteps, removeSteps)
			// converged checks the tree and the handler after the run
			// that follows a kill.
			converged := func(t *testing.T, what, dir string, rt *fileruntime.Containerd, want string, live bool) {
				t.Helper()
				if got := treetest.Content(t, dir); got != want {
					t.Errorf("%s left the tree\n%s\nwant\n%s", what, got, want)
				}
				if tc.restart && slices.Contains(rt.Loaded, r.Handler) != live {
					t.Errorf("%s left the runtime with %v", what, rt.Loaded)
				}
				if left := treetest.Find(t, dir, leftover); len(left) > 0 {
					t.Errorf("%s left behind %v", what, left)
				}
			}
			killAt := func(fsys *dyingFS, step string) Option {
				return WithStep(func(s string) {
					if s == step {
						fsys.dead = true
					}
				})
			}
			for _, step := range applySteps {
				t.Run("apply killed at "+step, func(t *testing.T) {
					for _, then := range []string{"apply", "remove"} {
						dir, fsys, rt := setup(t)
						apply(fsys, rt, killAt(fsys, step))
						kills++
						fsys.dead = false
						if then == "apply" {
							if _, err := apply(fsys, rt); err != nil {
								t.Fatalf("the next apply: %v", err)
							}
							converged(t, "the next apply", dir, rt, applied, true)
							continue
						}
						if _, err := remove(fsys, rt); err != nil {
							t.Fatalf("a remove after the kill: %v", err)
						}
						converged(t, "a remove after the kill", dir, rt, orig, false)
					}
				})
			}
			for _, step := range removeSteps {
				t.Run("remove killed at "+step, func(t *testing.T) {
					dir, fsys, rt := setup(t)
					if _, err := apply(fsys, rt); err != nil {
						t.Fatal(err)
					}
					remove(fsys, rt, killAt(fsys, step))
					kills++
					fsys.dead = false
					if _, err := remove(fsys, rt); err != nil {
						t.Fatalf("the next remove: %v", err)
					}
					converged(t, "the next remove", dir, rt, orig, false)
				})
			}
		})
	}
	t.Logf("%d kills", kills)
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
			before := treetest.Content(t, dir)
			rt.Refuse = tc.refuse
			_, err := ApplyLive(ctx, openRoot(t, dir), r, rt)
			if !IsRefused(err) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "broken") {
				t.Fatalf("apply --restart: %v", err)
			}
			t.Logf("refusal: %v", err)
			if rt.Restarts != 1 {
				t.Errorf("containerd restarted %d times", rt.Restarts-1)
			}
			if got := treetest.Content(t, dir); got != before {
				t.Errorf("files changed:\n%s\nwas\n%s", got, before)
			}
		})
	}
}
