package discover

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/goldenfile"
)

// runtimeView is the part of Facts the runtimes subsystem writes.
type runtimeView struct {
	Distribution facts.Distribution `json:"distribution"`
	Binaries     []facts.Binary     `json:"binaries,omitempty"`
	Runtimes     facts.Runtimes     `json:"runtimes"`
	Unknown      []facts.Missing    `json:"unknown,omitempty"`
}

// discoverRuntimes runs the runtimes subsystem alone on the fixture tree
// testdata/runtimes/<name>.
func discoverRuntimes(t *testing.T, name string) runtimeView {
	t.Helper()
	root, err := hostfs.OpenDir(filepath.Join("testdata", "runtimes", name))
	if err != nil {
		t.Fatal(err)
	}
	s := &session{root: root}
	var f facts.Facts
	runRuntimes(context.Background(), s, &f)
	f.Unknown = s.unknown
	f.SortUnknown()
	return runtimeView{f.Distribution, f.Binaries, f.Runtimes, f.Unknown}
}

func handlerNames(r *facts.ContainerRuntime) string {
	if r == nil {
		return "<nil>"
	}
	var names []string
	for _, h := range r.Handlers {
		names = append(names, h.Name)
	}
	return strings.Join(names, ",")
}

func TestRuntimesFixtures(t *testing.T) {
	tests := []struct {
		name          string
		distribution  string
		containerd    string // handler names; "<nil>" when containerd is absent
		configVersion int
		crio          string
		check         func(t *testing.T, v runtimeView)
	}{
		{name: "kubeadm-v2-kata", distribution: "kubeadm", containerd: "kata-qemu,kata-qemu-snp,runc", configVersion: 2, crio: "<nil>",
			check: func(t *testing.T, v runtimeView) {
				c := v.Runtimes.Containerd
				if c.Version != "1.7.25" || !c.SocketExists || strings.Join(c.Snapshotters, ",") != "overlayfs,nydus" {
					t.Errorf("containerd = %+v", c)
				}
				if len(v.Binaries) != 8 {
					t.Errorf("binaries = %+v, want 8 (kata-runtime symlink reported once)", v.Binaries)
				}
				if len(v.Unknown) != 0 {
					t.Errorf("unknown = %+v, want none: every output is recorded", v.Unknown)
				}
			}},
		{name: "containerd2-imports", distribution: "kubeadm", containerd: "kata-clh,kata-qemu-tdx,runc", configVersion: 3, crio: "<nil>",
			check: func(t *testing.T, v runtimeView) {
				c := v.Runtimes.Containerd
				if c.Version != "2.0.2" || c.SocketExists || len(c.DropIns) != 2 || c.Imports[0] != "/etc/containerd/conf.d/*.toml" {
					t.Errorf("containerd = %+v", c)
				}
				if c.Handlers[0].Source != "etc/containerd/conf.d/20-override.toml" || c.Handlers[0].PrivilegedWithoutHostDevices {
					t.Errorf("kata-clh = %+v, want overridden by 20-override.toml", c.Handlers[0])
				}
				if c.CDIEnabled == nil || *c.CDIEnabled {
					t.Errorf("cdiEnabled = %v, want false from 20-override.toml over config.toml's true", c.CDIEnabled)
				}
				reasons := map[string]string{}
				for _, u := range v.Unknown {
					reasons[u.Field] = u.Reason
				}
				if !strings.HasPrefix(reasons["binaries.virtiofsd.version"], facts.ReasonOffline) {
					t.Errorf("virtiofsd version reason = %q, want offline", reasons["binaries.virtiofsd.version"])
				}
				if !strings.HasPrefix(reasons["binaries.cloud-hypervisor.version"], facts.ReasonUnparseable) {
					t.Errorf("cloud-hypervisor version reason = %q, want unparseable", reasons["binaries.cloud-hypervisor.version"])
				}
			}},
		{name: "k3s", distribution: "k3s", containerd: "nvidia,runc", configVersion: 3, crio: "<nil>",
			check: func(t *testing.T, v runtimeView) {
				c := v.Runtimes.Containerd
				if c.Template != "var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl" || c.Binary != "/var/lib/rancher/k3s/data/current/bin/containerd" || c.Version != "2.0.4" {
					t.Errorf("containerd = %+v", c)
				}
				if strings.Contains(strings.Join(v.Distribution.Evidence, " "), "manifests") {
					t.Errorf("evidence %v cites the kubeadm leftover", v.Distribution.Evidence)
				}
			}},
		{name: "rke2", distribution: "rke2", containerd: "kata-qemu,runc", configVersion: 2, crio: "<nil>"},
		{name: "k0s", distribution: "k0s", containerd: "kata-fc,runc", configVersion: 2, crio: "<nil>",
			check: func(t *testing.T, v runtimeView) {
				c := v.Runtimes.Containerd
				if strings.Join(c.DropIns, ",") != "run/k0s/containerd-cri.toml,etc/k0s/containerd.d/kata.toml" {
					t.Errorf("dropIns = %v", c.DropIns)
				}
			}},
		{name: "microk8s", distribution: "microk8s", containerd: "nvidia-container-runtime,runc", configVersion: 2, crio: "<nil>"},
		{name: "aks", distribution: "aks", containerd: "kata,katacli,runc", configVersion: 2, crio: "<nil>"},
		{name: "openshift", distribution: "openshift", containerd: "<nil>", crio: "crun,kata,runc",
			check: func(t *testing.T, v runtimeView) {
				c := v.Runtimes.CRIO
				if c.Version != "1.31.0" || c.DefaultHandler != "runc" || c.Handlers[1].RuntimeRoot != "/run/vc" || !c.SocketExists {
					t.Errorf("crio = %+v", c)
				}
			}},
		{name: "malformed", distribution: "kubeadm", containerd: "", crio: "crun",
			check: func(t *testing.T, v runtimeView) {
				if e := v.Runtimes.Containerd.ConfigError; !strings.HasPrefix(e, "etc/containerd/config.toml:3:") {
					t.Errorf("containerd ConfigError = %q, want file:3:col", e)
				}
				if e := v.Runtimes.CRIO.ConfigError; !strings.HasPrefix(e, "etc/crio/crio.conf.d/10-kata.conf:3:35:") {
					t.Errorf("crio ConfigError = %q, want file:3:35", e)
				}
				reasons := map[string]string{}
				for _, u := range v.Unknown {
					reasons[u.Field] = u.Reason
				}
				for _, f := range []string{"runtimes.containerd.handlers", "runtimes.crio.handlers", "runtimes.crio.version"} {
					if reasons[f] == "" {
						t.Errorf("no unknown entry for %s in %+v", f, v.Unknown)
					}
				}
			}},
		{name: "none", distribution: "", containerd: "<nil>", crio: "<nil>",
			check: func(t *testing.T, v runtimeView) {
				// Without any Kubernetes only the kubelet's timeout is
				// unknown: there is no kubelet to read it from.
				if len(v.Binaries) != 0 || len(v.Unknown) != 1 || v.Unknown[0].Field != timeoutField {
					t.Errorf("binaries %v, unknown %v; want none but %s", v.Binaries, v.Unknown, timeoutField)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := discoverRuntimes(t, tt.name)
			goldenfile.AssertJSON(t, "testdata/runtimes/"+tt.name+".golden.json", v)
			if v.Distribution.Name != tt.distribution {
				t.Errorf("distribution = %q (%v), want %q", v.Distribution.Name, v.Distribution.Evidence, tt.distribution)
			}
			if tt.distribution != "" && len(v.Distribution.Evidence) == 0 {
				t.Error("distribution without evidence")
			}
			if got := handlerNames(v.Runtimes.Containerd); got != tt.containerd {
				t.Errorf("containerd handlers = %s, want %s", got, tt.containerd)
			}
			if c := v.Runtimes.Containerd; c != nil && c.ConfigVersion != tt.configVersion {
				t.Errorf("config version = %d, want %d", c.ConfigVersion, tt.configVersion)
			}
			if got := handlerNames(v.Runtimes.CRIO); got != tt.crio {
				t.Errorf("crio handlers = %s, want %s", got, tt.crio)
			}
			if tt.check != nil {
				tt.check(t, v)
			}
		})
	}
}
