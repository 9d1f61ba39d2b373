//go:build linux

package configure_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/treetest"
	"berth.dev/berth/platform"
)

// faultEnv carries a fault helper's job: TestMain runs the job instead of
// the tests when it is set. The helper is this test binary, a berth
// process of its own that the suite SIGKILLs.
const faultEnv = "BERTH_FAULT_HELPER"

// faultJob is one `config apply|remove --restart` as the helper runs it:
// the same code (ApplyLive, RemoveLive) restarting the test's containerd
// through the systemctl stand-in and asking it over CRI. With PauseAt it
// writes its pid to Ready at that step and waits there to be killed;
// Steps, when set, collects every step it passes.
type faultJob struct {
	Root, Op, Plat, Layout string
	ConfigVersion          int
	Containerd             string
	Systemctl, Journalctl  string
	Sock                   string
	PauseAt, Ready, Steps  string
}

func TestMain(m *testing.M) {
	if job := os.Getenv(faultEnv); job != "" {
		if err := runFaultHelper(job); err != nil {
			fmt.Fprintln(os.Stderr, "fault helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runFaultHelper(job string) error {
	var j faultJob
	if err := json.Unmarshal([]byte(job), &j); err != nil {
		return err
	}
	p, err := platform.Parse(j.Plat)
	if err != nil {
		return err
	}
	r, err := configure.Render(p, configure.Target{LayoutName: j.Layout, Layout: platform.Layouts()[j.Layout], ConfigVersion: j.ConfigVersion, Containerd: j.Containerd}, configure.Options{})
	if err != nil {
		return err
	}
	w, err := hostfs.OpenWritable(j.Root)
	if err != nil {
		return err
	}
	defer w.Close()
	live, err := hostfs.NewLive("/")
	if err != nil {
		return err
	}
	run := runtimectl.OnHost(live, time.Minute)
	rt := runtimectl.Runtime{
		Units:   runtimectl.Systemctl{Run: run, Path: j.Systemctl},
		Unit:    "containerd.service",
		Ask:     cri.Ask(j.Sock),
		Journal: runtimectl.Journal{Run: run, Path: j.Journalctl}.Log,
		Wait:    20 * time.Second,
	}
	step := configure.WithStep(func(s string) {
		if j.Steps != "" {
			f, err := os.OpenFile(j.Steps, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err == nil {
				fmt.Fprintln(f, s)
				f.Close()
			}
		}
		if s == j.PauseAt {
			if err := os.WriteFile(j.Ready, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
				panic(err)
			}
			time.Sleep(time.Minute) // killed here
		}
	})
	ctx := context.Background()
	switch j.Op {
	case "apply":
		_, err = configure.ApplyLive(ctx, w, r, rt, step)
	case "remove":
		_, err = configure.RemoveLive(ctx, w, r.Handler, rt, step)
	default:
		err = fmt.Errorf("unknown op %q", j.Op)
	}
	return err
}

// pickContainerd is the newest containerd of BERTH_CONTAINERDS whose
// version starts with prefix.
func pickContainerd(t *testing.T, prefix string) critest.Containerd {
	t.Helper()
	var found []critest.Containerd
	for _, c := range critest.Containerds(t) {
		if strings.HasPrefix(c.Version, prefix) {
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		t.Fatalf("no containerd %s* in BERTH_CONTAINERDS", prefix)
	}
	// BERTH_CONTAINERDS lists them oldest first.
	return found[len(found)-1]
}

// leftover is a file a berth run must not leave behind: a temporary
// file or the journal of an unfinished change.
func leftover(rel string) bool {
	n := path.Base(rel)
	return strings.HasPrefix(n, ".berth-") && strings.HasSuffix(n, ".tmp") || rel == configure.IntentPath
}

// TestFaultSuiteLive SIGKILLs a berth process at every step of `config
// apply --restart` and `config remove --restart` against a real
// containerd (1.7 and 2.x), then checks that one ordinary run converges:
// the handler live (or gone), the files exactly as a clean run leaves
// them, no temporary file or journal left; and that a remove after a
// killed apply restores the original byte for byte.
func TestFaultSuiteLive(t *testing.T) {
	for _, prefix := range []string{"1.7.", "2."} {
		ctr := pickContainerd(t, prefix)
		t.Run(ctr.Version, func(t *testing.T) { faultSuite(t, ctr) })
	}
}

func faultSuite(t *testing.T, ctr critest.Containerd) {
	began := time.Now()
	v := 2
	if ctr.Major() >= 2 {
		v = 3
	}
	root := t.TempDir()
	dirs := critest.NewDirs(t)
	main := filepath.Join(root, "etc/containerd/config.toml")
	if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(critest.BaseConfig(dirs, v, "")), 0o640); err != nil {
		t.Fatal(err)
	}
	orig := treetest.Content(t, root)
	rt, sc := unitRuntime(t, ctr, root, dirs)
	plat := "kubeadm-qemu-none"
	p, err := platform.Parse(plat)
	if err != nil {
		t.Fatal(err)
	}
	handler := p.Handler()
	job := faultJob{Root: root, Plat: plat, Layout: "kubeadm", ConfigVersion: v, Containerd: ctr.Version,
		Systemctl: sc.Path("systemctl"), Journalctl: sc.Path("journalctl"), Sock: dirs.Sock}

	// berth runs op, killed at step ("": it must succeed).
	berth := func(t *testing.T, op, step, steps string) {
		t.Helper()
		j := job
		j.Op, j.PauseAt, j.Steps = op, step, steps
		j.Ready = filepath.Join(t.TempDir(), "ready")
		data, _ := json.Marshal(j)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), faultEnv+"="+string(data))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		if step == "" {
			if err := <-done; err != nil {
				t.Fatalf("berth config %s --restart: %v\n%s", op, err, stderr.String())
			}
			return
		}
		deadline := time.After(90 * time.Second)
		for {
			if _, err := os.Stat(j.Ready); err == nil {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("berth config %s --restart ended (%v) before step %q\n%s", op, err, step, stderr.String())
			case <-deadline:
				t.Fatalf("berth config %s --restart never reached step %q", op, step)
			case <-time.After(5 * time.Millisecond):
			}
		}
		// The whole process group, as a node's OOM killer or power cut
		// would: no deferred cleanup runs.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	live := func(t *testing.T) []string {
		t.Helper()
		hs, err := rt.Handlers(context.Background())
		if err != nil {
			t.Fatalf("containerd does not answer: %v", err)
		}
		return hs
	}
	converged := func(t *testing.T, what, want string, wantLive bool) {
		t.Helper()
		if left := treetest.Find(t, root, leftover); len(left) > 0 {
			t.Errorf("%s: left behind %v", what, left)
		}
		if got := treetest.Content(t, root); got != want {
			t.Errorf("%s: the tree is\n%s\nwant\n%s", what, got, want)
		}
		if hs := live(t); slices.Contains(hs, handler) != wantLive || !slices.Contains(hs, "runc") {
			t.Errorf("%s: containerd has %v, want %s live=%v (and runc)", what, hs, handler, wantLive)
		}
	}

	// A clean run: the steps it passes and the tree it leaves.
	stepsOf := func(op string) []string {
		f := filepath.Join(t.TempDir(), "steps")
		berth(t, op, "", f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	applySteps := stepsOf("apply")
	applied := treetest.Content(t, root)
	converged(t, "clean apply", applied, true)
	removeSteps := stepsOf("remove")
	converged(t, "clean remove", orig, false)
	t.Logf("apply steps %q\nremove steps %q", applySteps, removeSteps)

	kills := 0
	// beforeRestart: a kill at step leaves containerd on what it ran (the
	// window between the files and the restart is the one to reach).
	beforeRestart := func(steps []string, step string) bool {
		return slices.Index(steps, step) < slices.Index(steps, "restarted")
	}
	for _, step := range applySteps {
		t.Run("apply killed at "+step, func(t *testing.T) {
			// Then a remove: the original, byte for byte.
			berth(t, "apply", step, "")
			kills++
			if beforeRestart(applySteps, step) && slices.Contains(live(t), handler) {
				t.Errorf("killed at %s, containerd has %s already", step, handler)
			}
			berth(t, "remove", "", "")
			converged(t, "remove after the kill", orig, false)
			// Then the same apply: as a clean apply leaves it.
			berth(t, "apply", step, "")
			kills++
			berth(t, "apply", "", "")
			converged(t, "apply after the kill", applied, true)
			berth(t, "remove", "", "")
			converged(t, "remove", orig, false)
		})
	}
	for _, step := range removeSteps {
		t.Run("remove killed at "+step, func(t *testing.T) {
			berth(t, "apply", "", "")
			berth(t, "remove", step, "")
			kills++
			if beforeRestart(removeSteps, step) && !slices.Contains(live(t), handler) {
				t.Errorf("killed at %s, containerd lost %s already", step, handler)
			}
			berth(t, "remove", "", "")
			converged(t, "remove after the kill", orig, false)
		})
	}
	t.Logf("containerd %s: %d kills, %d restarts, %s", ctr.Version, kills, sc.Restarts(rt.Unit), time.Since(began).Round(time.Second))
}

// nsRunner runs a command in the namespace containerd runs in on root (its
// /etc/containerd is root's), as a live host's Run would: a non-zero exit
// is an answer.
func nsRunner(t *testing.T, root string, dirs critest.Dirs) runtimectl.Runner {
	return func(_ context.Context, argv ...string) (hostfs.CommandResult, error) {
		out, err := critest.RunOnRoot(t, argv[0], root, dirs, argv[1:]...)
		res := hostfs.CommandResult{Argv: argv, Stdout: string(out)}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.ExitCode, res.Stderr = ee.ExitCode(), err.Error()
			return res, nil
		}
		return res, err
	}
}

// TestRefuseConfigThatWillNotLoadLive: a configuration containerd would
// not load at its next restart, for a breakage berth did not make (a broken
// unrelated drop-in on 2.x, an invalid value in the main config on 1.7),
// is refused before anything changes: containerd is not restarted and
// stays up, the files stay as they were.
func TestRefuseConfigThatWillNotLoadLive(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		v      int
		base   func(d critest.Dirs) string
		// breakIt breaks the configuration after containerd started.
		breakIt func(t *testing.T, root string, d critest.Dirs)
		says    string
	}{
		{"2.", 3, func(d critest.Dirs) string { return critest.BaseConfig(d, 3, "/etc/containerd/conf.d/*.toml") },
			func(t *testing.T, root string, _ critest.Dirs) {
				writeFile(t, filepath.Join(root, "etc/containerd/conf.d/50-other.toml"), "version = 3\n[plugins\n")
			}, "50-other.toml"},
		{"1.7.", 2, func(d critest.Dirs) string { return critest.BaseConfig(d, 2, "") },
			func(t *testing.T, root string, _ critest.Dirs) {
				main := filepath.Join(root, "etc/containerd/config.toml")
				data, err := os.ReadFile(main)
				if err != nil {
					t.Fatal(err)
				}
				broken := regexp.MustCompile(`(?m)^(\s*sandbox_image = ).*$`).ReplaceAllString(string(data), "${1}5")
				if broken == string(data) {
					t.Fatalf("no sandbox_image in the base config:\n%s", data)
				}
				writeFile(t, main, broken)
			}, "config.toml"},
	} {
		ctr := pickContainerd(t, tc.prefix)
		t.Run(ctr.Version, func(t *testing.T) {
			root := t.TempDir()
			dirs := critest.NewDirs(t)
			writeFile(t, filepath.Join(root, "etc/containerd/config.toml"), tc.base(dirs))
			rt, sc := unitRuntime(t, ctr, root, dirs)
			tc.breakIt(t, root, dirs)
			before := treetest.Content(t, root)
			rt.Config = &runtimectl.ContainerdConfig{Run: nsRunner(t, root, dirs), FS: os.DirFS(root), Bin: ctr.Bin, Config: "etc/containerd/config.toml"}
			if note, err := rt.LoadConfig(context.Background()); err == nil {
				t.Fatalf("containerd %s config dump loads the broken configuration (note %q)", ctr.Version, note)
			}
			w, err := hostfs.OpenWritable(root)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			p, _ := platform.Parse("kubeadm-qemu-none")
			r, err := configure.Render(p, configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: tc.v, Containerd: ctr.Version}, configure.Options{})
			if err != nil {
				t.Fatal(err)
			}
			n := sc.Restarts(rt.Unit)
			for _, op := range []string{"apply", "apply with nothing to change"} {
				_, err = configure.ApplyLive(context.Background(), w, r, rt, configure.WithStep(func(s string) {
					if s == "restarting" {
						t.Errorf("%s: berth was about to restart containerd", op)
					}
				}))
				if !configure.IsRefused(err) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s: %v, want a refusal naming %s", op, err, tc.says)
				}
				t.Logf("%s: %v", op, err)
				if op == "apply" && treetest.Content(t, root) != before {
					t.Errorf("the refused apply changed files")
				}
				if op == "apply" {
					// The files in place without a restart (as a run
					// without --restart leaves them): --restart with
					// nothing to change must refuse too.
					if _, err := configure.Apply(w, r); err != nil && !configure.IsRefused(err) {
						t.Fatal(err)
					}
				}
			}
			if sc.Restarts(rt.Unit) != n {
				t.Errorf("containerd was restarted %d times", sc.Restarts(rt.Unit)-n)
			}
			if hs, err := rt.Handlers(context.Background()); err != nil || !slices.Contains(hs, "runc") {
				t.Errorf("containerd is not up after the refusals: %v %v", hs, err)
			}
		})
	}
}
