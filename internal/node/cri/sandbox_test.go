package cri_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit/testnode"
	"berth.dev/berth/platform"
)

// runtimeTable is a CRI runtime table of containerd's version 3 config.
func runtimeTable(name, typ, path, extra string) string {
	return fmt.Sprintf("\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.%s]\n  runtime_type = %q\n  runtime_path = %q\n%s",
		name, typ, path, extra)
}

// TestProveSandbox starts a real containerd with a handler on runc's shim
// and one on a shim that fails as Kata's does without a VM, and proves
// both: the first passes, the second fails with the shim's own text, and
// neither leaves a sandbox behind.
func TestProveSandbox(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "invocations")
	fail := testnode.BuildFailShim(t, dir, marker)
	shim := os.Getenv(testnode.ShimEnv)
	n := testnode.StartRuntime(t, testnode.RuntimeOptions{Runtimes: runtimeTable("berth-runc", "io.containerd.runc.v2", shim,
		fmt.Sprintf("  [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.berth-runc.options]\n    SystemdCgroup = false\n    Root = %q\n", filepath.Join(dir, "runc"))) +
		runtimeTable("berth-fail", "io.containerd.berth-fail.v2", fail, "")})
	for _, tc := range []struct {
		handler string
		want    cri.SandboxOutcome
		text    string
	}{
		{"berth-runc", cri.SandboxPass, ""},
		{"berth-fail", cri.SandboxFail, testnode.FailShimMessage},
		{"no-such-handler", cri.SandboxFail, "no-such-handler"},
	} {
		t.Run(tc.handler, func(t *testing.T) {
			res, err := cri.ProveSandbox(context.Background(), n.ContainerdSocket, tc.handler, t.TempDir(), 2*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.want || !strings.Contains(res.Error, tc.text) || res.Cleanup != "" {
				t.Errorf("got %+v, want %s with %q", res, tc.want, tc.text)
			}
			if left := n.Sandboxes(t, cri.LabelKey); len(left) > 0 {
				t.Errorf("sandboxes left behind: %v", left)
			}
		})
	}
	if b, err := os.ReadFile(marker); err != nil || len(b) == 0 {
		t.Errorf("the failing shim was never run (%v): the failure did not come from it", err)
	}
}

// TestProveSandboxCancelled cancels the caller's context while the
// sandbox starts: the start is let finish and the sandbox removed (an
// interrupted start leaks containerd's network namespace), the result is
// a failure saying so, and nothing is left behind.
func TestProveSandboxCancelled(t *testing.T) {
	shim := os.Getenv(testnode.ShimEnv)
	dir := t.TempDir()
	n := testnode.StartRuntime(t, testnode.RuntimeOptions{Runtimes: runtimeTable("berth-runc", "io.containerd.runc.v2", shim,
		fmt.Sprintf("  [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.berth-runc.options]\n    Root = %q\n", filepath.Join(dir, "runc")))})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := cri.ProveSandbox(ctx, n.ContainerdSocket, "berth-runc", t.TempDir(), 2*time.Minute)
	if err != nil || res.Outcome != cri.SandboxFail || !strings.Contains(res.Error, "cancelled") || res.Duration == 0 {
		t.Errorf("cancelled proof: %+v, %v", res, err)
	}
	if left := n.Sandboxes(t, cri.LabelKey); len(left) > 0 {
		t.Errorf("sandboxes left behind after a cancelled proof: %v", left)
	}
	if _, err := cri.ProveSandbox(ctx, n.ContainerdSocket, "berth-runc", t.TempDir(), time.Minute); err == nil {
		t.Error("a proof on a cancelled context started")
	}
}

// TestSkipReason: which hosts cannot prove which handlers.
func TestSkipReason(t *testing.T) {
	parse := func(s string) platform.Platform {
		p, err := platform.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	qemu := parse("kubeadm-qemu-none")
	usable := &facts.KVMProbe{Opened: true, APIVersion: 12, CreateVM: true}
	host := func(kvm *facts.KVMProbe, nodes ...string) *facts.Facts {
		f := &facts.Facts{Live: true, Devices: facts.Devices{KVM: kvm, Nodes: map[string]facts.DeviceNode{}}}
		for _, n := range nodes {
			name, exists, _ := strings.Cut(n, "=")
			f.Devices.Nodes[name] = facts.DeviceNode{Exists: exists == "yes"}
		}
		return f
	}
	for _, tc := range []struct {
		name     string
		p        platform.Platform
		typ      string
		f        *facts.Facts
		wantSkip string
	}{
		{"usable kvm", qemu, "io.containerd.kata-qemu.v2", host(usable, "dev/kvm=yes"), ""},
		{"no /dev/kvm", qemu, "io.containerd.kata-qemu.v2", host(nil, "dev/kvm=no"), "/dev/kvm does not exist"},
		{"kvm busy", qemu, "io.containerd.kata-qemu.v2", host(&facts.KVMProbe{Opened: true, Errno: "EBUSY"}, "dev/kvm=yes"), "KVM_CREATE_VM failed (EBUSY)"},
		{"kvm not opened", qemu, "", host(&facts.KVMProbe{Errno: "EACCES"}, "dev/kvm=yes"), "opening it failed (EACCES)"},
		{"kvm unknown", qemu, "", host(nil), "not known"},
		{"no facts", qemu, "", nil, "not known"},
		{"offline root with /dev/kvm", qemu, "", host(nil, "dev/kvm=yes"), ""},
		{"runc handler needs no kvm", qemu, "io.containerd.runc.v2", host(nil, "dev/kvm=no"), ""},
		{"clh", parse("kubeadm-clh-none"), "io.containerd.kata-clh.v2", host(nil, "dev/kvm=no"), "/dev/kvm does not exist"},
		{"aks needs /dev/mshv", parse("aks-clh-snp"), "", host(nil, "dev/mshv=no", "dev/kvm=no"), "/dev/mshv does not exist"},
		{"aks with /dev/mshv", parse("aks-clh-snp"), "", host(nil, "dev/mshv=yes", "dev/kvm=no"), ""},
		{"peer pods need no kvm", parse("kubeadm-remote-none"), "", host(nil, "dev/kvm=no"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cri.SkipReason(tc.p, tc.typ, tc.f)
			if (tc.wantSkip == "") != (got == "") || !strings.Contains(got, tc.wantSkip) {
				t.Errorf("SkipReason(%s, %q) = %q, want %q", tc.p, tc.typ, got, tc.wantSkip)
			}
		})
	}
}
