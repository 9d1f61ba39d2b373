package nodeinstall

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/node/runtimectl/systemdbus"
	"berth.dev/berth/internal/testkit/testsystemd"
)

const pin = "@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// TestOptionsCheck: what the node-installer refuses before it opens the
// cluster or the host (each a usage error saying why), and the defaults
// it takes from the environment.
func TestOptionsCheck(t *testing.T) {
	base := func() Options {
		return Options{NodeName: "n", Platforms: mustPlatforms(t, "kubeadm-qemu-none"), Manifest: "m.yaml" + pin, Prefix: "/opt/berth"}
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no node name", func(o *Options) { o.NodeName = "" }, "NODE_NAME"},
		{"no platform", func(o *Options) { o.Platforms = nil }, "--platform is required"},
		{"no manifest", func(o *Options) { o.Manifest = "" }, "--manifest is required"},
		{"unpinned manifest", func(o *Options) { o.Manifest = "m.yaml" }, "not pinned"},
		{"bad mode", func(o *Options) { o.Mode = "upgrade" }, "expected install or cleanup"},
		{"bad mode from the environment", func(o *Options) { o.Getenv = env(ModeEnv, "upgrade") }, "expected install or cleanup"},
		{"relative prefix", func(o *Options) { o.Prefix = "opt/berth" }, "absolute"},
		{"relative kata config dir", func(o *Options) { o.KataConfigDir = "etc/kata" }, "--kata-config-dir"},
		{"custom flags for kubeadm", func(o *Options) { o.RuntimeUnit = "x.service" }, "custom distribution"},
		{"custom without its runtime", func(o *Options) { o.Platforms = mustPlatforms(t, "custom-qemu-none") }, "--containerd-config"},
		{"custom with both runtimes", func(o *Options) {
			o.Platforms, o.ContainerdConfig, o.CRIOConfig = mustPlatforms(t, "custom-qemu-none"), "/etc/c.toml", "/etc/crio.conf"
		}, "give one"},
		{"restart lease without namespace", func(o *Options) { o.RestartLease = "berth-restart" }, "expected NAMESPACE/NAME"},
		{"restart lease with a path", func(o *Options) { o.RestartLease = "ns/a/b" }, "expected NAMESPACE/NAME"},
		{"negative restart concurrency", func(o *Options) { o.RestartLease = "ns/l"; o.MaxConcurrentRestarts = -1 }, "expected 1 or more"},
		{"restart concurrency without a lease", func(o *Options) { o.MaxConcurrentRestarts = 3 }, "needs --restart-lease"},
		{"unknown check to ignore", func(o *Options) { o.Ignore = []string{"no.such.check"} }, "no.such.check"},
		{"bad install suffix", func(o *Options) { o.Suffix = "Blue" }, `--install-suffix "Blue": expected lower-case letters`},
		{"install suffix too long", func(o *Options) { o.Suffix = strings.Repeat("a", 22) }, "expected at most 21"},
		{"install suffix too long for a label", func(o *Options) {
			o.Platforms, o.Suffix = mustPlatforms(t, "kubeadm-cloud-hypervisor-none+debug+rust+devmapper"), "abcd"
		}, "more than 63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.edit(&o)
			_, err := o.Check()
			if err == nil || !IsUsage(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check() = %v; want a usage error containing %q", err, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name   string
		edit   func(*Options)
		mode   Mode
		node   string
		custom string
		lease  string
	}{
		{name: "install by default", edit: func(*Options) {}, mode: ModeInstall, node: "n"},
		{name: "environment", edit: func(o *Options) { o.NodeName, o.Getenv = "", env(ModeEnv, "cleanup", "NODE_NAME", "env-node") }, mode: ModeCleanup, node: "env-node"},
		{name: "flag over environment", edit: func(o *Options) { o.Mode, o.Getenv = "install", env(ModeEnv, "cleanup") }, mode: ModeInstall, node: "n"},
		{name: "cleanup needs no platform or manifest", edit: func(o *Options) { o.Mode, o.Platforms, o.Manifest = "cleanup", nil, "" }, mode: ModeCleanup, node: "n"},
		{name: "custom", edit: func(o *Options) {
			o.Platforms, o.ContainerdConfig, o.RuntimeUnit = mustPlatforms(t, "custom-qemu-none"), "/etc/k0s/containerd.toml", "k0sworker.service"
		}, mode: ModeInstall, node: "n", custom: "k0sworker.service"},
		{name: "restart lease", edit: func(o *Options) { o.RestartLease = "berth-system/restart" }, mode: ModeInstall, node: "n", lease: "berth-system/restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			tc.edit(&o)
			s, err := o.Check()
			if err != nil {
				t.Fatal(err)
			}
			custom := ""
			if s.Custom != nil {
				custom = strings.Join(s.Custom.Units, ",")
			}
			lease := ""
			if s.LeaseName != "" {
				lease = s.LeaseNamespace + "/" + s.LeaseName
			}
			if s.Mode != tc.mode || s.NodeName != tc.node || custom != tc.custom || lease != tc.lease {
				t.Errorf("Check() = mode %s, node %s, custom units %q, lease %q; want %s, %s, %q, %q", s.Mode, s.NodeName, custom, lease, tc.mode, tc.node, tc.custom, tc.lease)
			}
		})
	}
}

// TestSettingsConfig: the configuration restarts the runtime through the
// systemd socket under the host's directory, asks it on its CRI socket
// there, and refuses a host root that is not a directory.
func TestSettingsConfig(t *testing.T) {
	dir := testsystemd.ShortDir(t)
	sock := filepath.Join(dir, systemdbus.PrivateSocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	sup := testsystemd.Start(t, sock, testsystemd.Unit{Name: "containerd.service", Start: func() error { return nil }, Stop: func() {}})
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Options{NodeName: "n", Platforms: mustPlatforms(t, "kubeadm-qemu-none"), Manifest: "m.yaml" + pin, Prefix: "/opt/berth",
		SystemdSocket: "/" + systemdbus.PrivateSocket, RuntimeSocket: "/run/test/c.sock", RestartLease: "ns/l", MaxConcurrentRestarts: 4, VerifySandbox: true}.Check()
	if err != nil {
		t.Fatal(err)
	}
	h := Host{Root: root, Writable: writable(t, dir), Log: slog.New(slog.DiscardHandler)}
	cfg, err := s.Config(h)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeName != "n" || cfg.Writable.Name() != dir || cfg.Prefix != "/opt/berth" || cfg.RestartLease == nil || cfg.RestartLease.Name != "l" || cfg.RestartLease.Holder != "n" || cfg.RestartLease.Slots != 4 {
		t.Errorf("config: %+v", cfg)
	}
	l, _ := mustPlatforms(t, "kubeadm-qemu-none")[0].Distribution().Layout()
	if cfg.Sandbox == nil || cfg.Sandbox.Socket(l) != (cri.Endpoint{Root: dir, Path: "/run/test/c.sock"}) {
		t.Errorf("--verify-sandbox: %+v, want the sandbox proved over the --runtime-socket under the host directory", cfg.Sandbox)
	}
	rt, err := cfg.Runtime(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Restart(context.Background()); err != nil || sup.Restarts("containerd.service") != 1 {
		t.Errorf("restart through the host's systemd: %v, %d restarts", err, sup.Restarts("containerd.service"))
	}
	if _, _, err := rt.(runtimectl.Runtime).Running(context.Background()); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "run/test/c.sock")) {
		t.Errorf("asked the runtime at %v, want the --runtime-socket under the host directory", err)
	}
	if rt.Log(context.Background()) != "" {
		t.Error("a journal from a root that is not live")
	}

	noRuntime := Options{NodeName: "n", Mode: "cleanup", Prefix: "/opt/berth", SystemdSocket: "/" + systemdbus.PrivateSocket}
	s, err = noRuntime.Check()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = s.Config(h)
	if err != nil {
		t.Fatal(err)
	}
	crio, _ := mustPlatforms(t, "openshift-qemu-none")[0].Distribution().Layout()
	if _, err := cfg.Runtime(context.Background(), crio); !errors.Is(err, runtimectl.ErrNoActiveUnit) {
		t.Errorf("no runtime unit active: %v", err)
	}

	h.Writable = nil // --root not a directory
	if _, err := s.Config(h); err == nil || !IsUsage(err) || !strings.Contains(err.Error(), "needs its root directory") {
		t.Errorf("missing host directory: %v", err)
	}
}

// TestOptionsSuffix: --install-suffix moves the default prefix to
// /opt/berth-<suffix> and leaves an explicit one as given.
func TestOptionsSuffix(t *testing.T) {
	for _, tc := range []struct{ suffix, prefix, want string }{
		{"", "", "/opt/berth"},
		{"blue", "", "/opt/berth-blue"},
		{"blue", "/opt/kata-blue", "/opt/kata-blue"},
	} {
		o := Options{NodeName: "n", Platforms: mustPlatforms(t, "kubeadm-qemu-none"), Manifest: "m.yaml" + pin, Prefix: tc.prefix, Suffix: tc.suffix}
		s, err := o.Check()
		if err != nil {
			t.Fatal(err)
		}
		if s.Prefix != tc.want || string(s.Suffix) != tc.suffix {
			t.Errorf("suffix %q prefix %q: Check() = prefix %s suffix %q, want %s", tc.suffix, tc.prefix, s.Prefix, s.Suffix, tc.want)
		}
	}
}
