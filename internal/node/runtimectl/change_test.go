//go:build linux

package runtimectl_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/testkit/testsystemd"
	"berth.dev/berth/platform"
)

// TestChange runs `berth config apply|remove --restart`'s workflow on a
// live host whose systemctl and journalctl are the stand-ins: what it
// prints, the commands it runs, and the rollback it reports.
func TestChange(t *testing.T) {
	ctx := context.Background()
	n := newLiveNode(t)
	sc := testsystemd.StartSystemctl(t, t.TempDir(), n.unit)
	live, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	w := n.writable(t)
	var out, errOut bytes.Buffer
	ch := runtimectl.Change{Host: live, FS: w, Restart: true, Out: &out, Err: &errOut,
		Ask:       func(platform.Platform) runtimectl.Ask { return cri.Ask(n.dirs.Sock) },
		Systemctl: sc.Path("systemctl"), Journalctl: sc.Path("journalctl")}
	say := func() string {
		s := out.String() + errOut.String()
		out.Reset()
		errOut.Reset()
		return s
	}

	r := render(t, "1.6.20")
	if err := ch.Apply(ctx, r); err != nil {
		t.Fatalf("apply: %v\n%s", err, say())
	}
	if got, want := say(), "kata-qemu: applied\n  /opt/berth/etc/kata/kubeadm-qemu-none.toml\n  /etc/containerd/config.toml\nrestarted; live handlers: kata-qemu, runc\n"; got != want {
		t.Errorf("apply said:\n%s\nwant\n%s", got, want)
	}
	if err := ch.Apply(ctx, r); err != nil || say() != "kata-qemu: nothing to change (already applied)\n" {
		t.Errorf("second apply: %v", err)
	}
	st, err := configure.LoadState(w)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.RemoveHandlers(ctx, st, st.Handlers()); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if got := say(); !strings.Contains(got, "kata-qemu: removed\n") || !strings.Contains(got, "restarted; live handlers: runc\n") {
		t.Errorf("remove said:\n%s", got)
	}
	err = ch.Apply(ctx, render(t, "2.1.9"))
	if err == nil || !configure.IsRefused(err) || !strings.Contains(err.Error(), "failed to load plugin io.containerd.grpc.v1.cri") {
		t.Errorf("breaking apply: %v", err)
	}
	var calls []string
	for _, c := range sc.Calls() {
		calls = append(calls, strings.Join(c, " "))
	}
	// Apply, second apply (nothing to restart, the unit still looked
	// for), remove, breaking apply with its rollback.
	want := []string{
		"systemctl is-active containerd.service", "systemctl restart containerd.service",
		"systemctl is-active containerd.service",
		"systemctl is-active containerd.service", "systemctl restart containerd.service",
		"systemctl is-active containerd.service", "systemctl restart containerd.service",
		"journalctl -u containerd.service --since -2min --no-pager -o cat", "systemctl restart containerd.service",
	}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands run:\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}

	// Not a running system: the change is made, nothing restarted.
	dir, err := hostfs.OpenDir(n.root)
	if err != nil {
		t.Fatal(err)
	}
	ch.Host = dir
	if err := ch.Apply(ctx, r); err != nil {
		t.Fatal(err)
	}
	if got := say(); !strings.Contains(got, "warning: not restarting: --root "+n.root+" is not a running system") ||
		!strings.Contains(got, "to load it: systemctl restart containerd.service && berth verify --platform kubeadm-qemu-none") {
		t.Errorf("apply on a root that is not live said:\n%s", got)
	}
	// No active unit: the same.
	ch.Host = live
	sc2 := testsystemd.StartSystemctl(t, t.TempDir())
	ch.Systemctl = sc2.Path("systemctl")
	if err := ch.RemoveHandlers(ctx, st, []string{"kata-qemu"}); err != nil {
		t.Fatal(err)
	}
	if got := say(); !strings.Contains(got, "warning: none of containerd.service is active: nothing restarted") {
		t.Errorf("remove without an active unit said:\n%s", got)
	}
}

// TestShellWord runs each word through a real sh: the printed command
// names exactly the unit given, whatever it holds, and a plain name
// stays unquoted.
func TestShellWord(t *testing.T) {
	for _, s := range []string{"containerd.service", `containerd@node\x2d1.service`, "a b", "it's", "$(id)", "`id`", "a;b", "*", "~root", ""} {
		w := runtimectl.ShellWord(s)
		out, err := exec.Command("sh", "-c", "printf '%s' "+w).Output()
		if err != nil || string(out) != s {
			t.Errorf("ShellWord(%q) = %s: sh read %q, %v", s, w, out, err)
		}
	}
	if w := runtimectl.ShellWord("k3s-agent.service"); w != "k3s-agent.service" {
		t.Errorf("plain name quoted: %s", w)
	}
}
