package testnode

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// CNIBinDir is where Debian's containernetworking-plugins installs the
// bridge, host-local and loopback plugins.
const CNIBinDir = "/usr/lib/cni"

// containerdConfig is the node's containerd 2.x configuration (version 3):
// every path it would otherwise put on the machine (root, state, sockets,
// /opt/containerd, the runc state, network namespaces) under dir, the
// sandbox image pinned to PauseImage, the runc shim of the same containerd
// release (Debian's 1.6 shim cannot start tasks for 2.x), runc from runc,
// cgroupfs, and CNI from Debian's plugins with the config in dir/cni/net.d
// (lo is brought up by containerd itself: through the loopback plugin it
// would leave a libcni result cache in /var/lib/cni). NRI is off: it would
// serve /var/run/nri/nri.sock.
//
// restrictOOM sets restrict_oom_score_adj, containerd's knob for a daemon
// that may not lower OOM scores (no CAP_SYS_RESOURCE, as in some VM
// sandboxes): the kubelet asks -998 for every pod sandbox and runc would
// fail to start it ("failed to update /proc/self/oom_score_adj:
// Permission denied"); containerd then clamps scores to its own.
func containerdConfig(dir, sock, shim, runc string, restrictOOM bool) string {
	var b strings.Builder
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	b.WriteString("version = 3\n")
	fmt.Fprintf(&b, "root = %s\nstate = %s\n", q(filepath.Join(dir, "root")), q(filepath.Join(dir, "state")))
	b.WriteString(`disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp"]` + "\n")
	fmt.Fprintf(&b, "\n[grpc]\n  address = %s\n\n[ttrpc]\n  address = %s\n", q(sock), q(sock+".ttrpc"))
	fmt.Fprintf(&b, "\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %s\n", q(filepath.Join(dir, "opt")))
	b.WriteString(`
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "` + PauseImage + `"

[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
`)
	if restrictOOM {
		b.WriteString("  restrict_oom_score_adj = true\n")
	}
	b.WriteString(`  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
`)
	fmt.Fprintf(&b, "      runtime_path = %s\n", q(shim))
	b.WriteString(`      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
`)
	fmt.Fprintf(&b, "        BinaryName = %s\n        Root = %s\n", q(runc), q(filepath.Join(dir, "runc")))
	fmt.Fprintf(&b, "  [plugins.\"io.containerd.cri.v1.runtime\".cni]\n    bin_dirs = [%s]\n    conf_dir = %s\n    use_internal_loopback = true\n",
		q(CNIBinDir), q(filepath.Join(dir, "cni", "net.d")))
	return b.String()
}

// cniConfig is a bridge network on its own bridge and /24 with host-local
// addresses kept under dir. ipMasq is off (no iptables);
// the bridge is the pods' gateway, so pods reach the host's addresses.
func cniConfig(name, bridge, subnet, dir string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       name,
		"plugins": []any{
			map[string]any{
				"type":      "bridge",
				"bridge":    bridge,
				"isGateway": true,
				"ipMasq":    false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": filepath.Join(dir, "ipam"),
					"ranges":  []any{[]any{map[string]any{"subnet": subnet}}},
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
				},
			},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletParams are the node-specific values of the kubelet config.
type kubeletParams struct {
	Socket, RootDir, PodLogsDir, CgroupRoot, ClientCA string
	Port                                              int
	CgroupV1                                          bool
}

// kubeletConfig is the node's KubeletConfiguration (v1beta1, JSON is
// YAML): cgroupfs (no systemd on a test machine, and a cgroup root of its
// own instead of /kubepods so that nodes never share cgroups), cgroup v1
// allowed where the machine has it, swap allowed, no static pods, its own
// port and no healthz or read-only port (no fixed ports), x509 (the API
// server's kubelet client certificate) and webhook authentication, and
// eviction and image garbage collection thresholds a busy CI disk does
// not trip: the imported images cannot be pulled again.
func kubeletConfig(p kubeletParams) ([]byte, error) {
	conf := map[string]any{
		"apiVersion":                  "kubelet.config.k8s.io/v1beta1",
		"kind":                        "KubeletConfiguration",
		"cgroupDriver":                "cgroupfs",
		"cgroupRoot":                  p.CgroupRoot,
		"failSwapOn":                  false,
		"containerRuntimeEndpoint":    "unix://" + p.Socket,
		"imageServiceEndpoint":        "unix://" + p.Socket,
		"staticPodPath":               "",
		"podLogsDir":                  p.PodLogsDir,
		"port":                        p.Port,
		"healthzPort":                 0,
		"readOnlyPort":                0,
		"resolvConf":                  "/etc/resolv.conf",
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":  "1Mi",
			"nodefs.available":  "1%",
			"imagefs.available": "1%",
			"nodefs.inodesFree": "1%",
		},
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": p.ClientCA},
		},
		"authorization": map[string]any{"mode": "Webhook"},
	}
	if p.CgroupV1 {
		// Kubernetes >= 1.35 refuses cgroup v1 unless told otherwise.
		conf["failCgroupV1"] = false
	}
	return json.MarshalIndent(conf, "", "  ")
}
