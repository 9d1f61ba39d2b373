package cli

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/treetest"
)

// leftover is a file a berth run must not leave behind: a temporary
// file or the journal of an unfinished change.
func leftover(rel string) bool {
	n := path.Base(rel)
	return strings.HasPrefix(n, ".berth-") && strings.HasSuffix(n, ".tmp") || rel == configure.IntentPath
}

// TestConfigKilledAtEveryStep SIGKILLs a real berth (built with the
// berthtest hook, BERTH_TEST_KILL_AT) at every step of `config apply` and
// `config remove` on a copy of a kubeadm fixture (its main config
// extended in place with a backup, berth's nydus files, the state), then
// runs one ordinary command: `config remove --all` restores the original
// byte for byte, `config apply` leaves what a clean apply leaves, and
// neither leaves a temporary file or the journal.
func TestConfigKilledAtEveryStep(t *testing.T) {
	bin := buildBerth(t, "berthtest")
	began := time.Now()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(hostsDir, "tdx-emr-kubeadm-ready"))); err != nil {
		t.Fatal(err)
	}
	orig := treetest.Content(t, root)
	berth := func(t *testing.T, killAt, steps string, args ...string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--root", root, "config"}, args...)...)
		cmd.Env = append(os.Environ(), "BERTH_TEST_KILL_AT="+killAt, "BERTH_TEST_STEPS="+steps)
		out, err := cmd.CombinedOutput()
		if killAt == "" && err != nil {
			t.Fatalf("berth config %v: %v\n%s", args, err, out)
		}
		if killAt != "" && exitOf(t, err) != -9 {
			t.Fatalf("berth config %v was not killed at %s (exit %d)\n%s", args, killAt, exitOf(t, err), out)
		}
	}
	apply := []string{"apply", "-p", "kubeadm-qemu-tdx"}
	removeAll := []string{"remove", "--all"}
	same := func(t *testing.T, what, want string) {
		t.Helper()
		if left := treetest.Find(t, root, leftover); len(left) > 0 {
			t.Errorf("%s: left behind %v", what, left)
		}
		if got := treetest.Content(t, root); got != want {
			t.Errorf("%s: the tree is\n%s\nwant\n%s", what, got, want)
		}
	}
	stepsOf := func(args []string) []string {
		f := filepath.Join(t.TempDir(), "steps")
		berth(t, "", f, args...)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	applySteps := stepsOf(apply)
	applied := treetest.Content(t, root)
	removeSteps := stepsOf(removeAll)
	same(t, "clean remove", orig)
	kills := 0
	for _, step := range applySteps {
		t.Run("apply killed at "+step, func(t *testing.T) {
			berth(t, step, "", apply...)
			kills++
			berth(t, "", "", removeAll...)
			same(t, "remove --all after the kill", orig)
			berth(t, step, "", apply...)
			kills++
			berth(t, "", "", apply...)
			same(t, "apply after the kill", applied)
			berth(t, "", "", removeAll...)
		})
	}
	for _, step := range removeSteps {
		t.Run("remove killed at "+step, func(t *testing.T) {
			berth(t, "", "", apply...)
			berth(t, step, "", removeAll...)
			kills++
			berth(t, "", "", removeAll...)
			same(t, "remove --all after the kill", orig)
		})
	}
	t.Logf("%d kills of a real berth in %s", kills, time.Since(began).Round(time.Millisecond))
}
