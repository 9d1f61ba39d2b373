package configure_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// TestPlan plans on fixture hosts: a ready platform is rendered, a
// platform whose checks fail is refused (or rendered beside the refusal
// with Force), and what the facts cannot tell is a TargetError.
func TestPlan(t *testing.T) {
	hosts := filepath.Join("..", "..", "..", "testdata", "hosts")
	for _, tc := range []struct {
		name, root, plat string
		force            bool
		version          int
		// rendered, notReady: what is returned beside the error.
		rendered, notReady bool
		// err: "" none, else "not ready", "target" or "refused", and a
		// text the error holds.
		err, says string
	}{
		{name: "ready", root: filepath.Join(hosts, "tdx-emr-kubeadm-ready"), plat: "kubeadm-qemu-tdx", rendered: true},
		{name: "not ready", root: filepath.Join(hosts, "cloud-vm-no-nested"), plat: "kubeadm-qemu-snp", err: "not ready", says: "virt.hardware"},
		{name: "not ready, forced", root: filepath.Join(hosts, "cloud-vm-no-nested"), plat: "kubeadm-qemu-snp", force: true, rendered: true, notReady: true},
		// A CRI-O host: kubeadm's platform fails its checks there, and
		// the host's facts hold no containerd version.
		{name: "containerd version unknown", root: filepath.Join(hosts, "openshift-crio"), plat: "kubeadm-qemu-none", force: true, notReady: true, err: "target", says: "--containerd-config-version"},
		{name: "containerd version given", root: filepath.Join(hosts, "openshift-crio"), plat: "kubeadm-qemu-none", force: true, version: 3, notReady: true, rendered: true},
		{name: "no such containerd version", root: filepath.Join(hosts, "openshift-crio"), plat: "kubeadm-qemu-none", force: true, version: 9, notReady: true, err: "target"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := hostfs.OpenDir(tc.root)
			if err != nil {
				t.Fatal(err)
			}
			p, err := platform.Parse(tc.plat)
			if err != nil {
				t.Fatal(err)
			}
			r, nr, err := configure.Plan(context.Background(), root, configure.PlanRequest{
				Platform: p, ConfigVersion: tc.version, Force: tc.force, Discover: discover.Options{Now: time.Now}})
			var notReady *configure.NotReadyError
			var target *configure.TargetError
			got := ""
			switch {
			case err == nil:
			case errors.As(err, &notReady):
				got = "not ready"
			case errors.As(err, &target):
				got = "target"
			case configure.IsRefused(err):
				got = "refused"
			default:
				got = "other"
			}
			if got != tc.err || err != nil && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Plan = %v (%s); want %s saying %q", err, got, tc.err, tc.says)
			}
			if (r != nil) != tc.rendered || (nr != nil) != tc.notReady {
				t.Errorf("rendered %v, not ready %v; want %v, %v", r != nil, nr, tc.rendered, tc.notReady)
			}
			if r != nil && r.Handler != p.Handler() {
				t.Errorf("rendered handler %s", r.Handler)
			}
			if nr != nil && (nr.Platform != p || !strings.HasPrefix(nr.Error(), "platform "+tc.plat+" is not ready on this node; failing checks:\n  - ")) {
				t.Errorf("not ready: %v", nr)
			}
		})
	}
}

// TestPlanForceKeepsConfigParse: --force overrides failing readiness
// checks, never a runtime configuration that does not parse (the runtime
// would not start on it at its next restart).
func TestPlanForceKeepsConfigParse(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "..", "testdata", "hosts", "tdx-emr-kubeadm-ready"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/containerd/config.toml"), []byte("version = 2\n[plugins\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := platform.Parse("kubeadm-qemu-tdx")
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := configure.Plan(context.Background(), root, configure.PlanRequest{Platform: p, Force: true, Discover: discover.Options{Now: time.Now}})
	var nr *configure.NotReadyError
	if r != nil || !errors.As(err, &nr) || !nr.Unforceable() || !strings.Contains(err.Error(), "runtime.config.parse") {
		t.Fatalf("forced plan on a config that does not parse: rendered %v, %v", r != nil, err)
	}
}
