//go:build linux

package configure_test

import (
	"berth.dev/berth/internal/testkit/treetest"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit/testnode"
	"berth.dev/berth/platform"
)

// shimGiven is what the test shim records (failshim's Given).
type shimGiven struct {
	ConfigPath string         `json:"configPath"`
	Config     map[string]any `json:"config"`
	DropIns    []string       `json:"dropIns"`
	Error      string         `json:"error"`
}

// TestKataOptionsLive: after apply with a drop-in and an agent proxy, a
// real containerd starting a pod sandbox on the handler berth wrote hands
// the shim the ConfigPath of the moved Kata configuration, and that file
// with its config.d merged as Kata's runtime merges it has the drop-in's
// override and agent.https_proxy/agent.no_proxy in kernel_params. The
// handler's tables are berth's, as applied, with only runtime_path
// pointing at the test shim instead of Kata's.
func TestKataOptionsLive(t *testing.T) {
	root := t.TempDir()
	treetest.Write(t, root, "etc/containerd/config.toml", "version = 3\n")
	p, err := platform.Parse("kubeadm-qemu-none")
	if err != nil {
		t.Fatal(err)
	}
	target := configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 3, Containerd: "2.4.2"}
	o := configure.KataOptions{
		DropIn:     []byte("[hypervisor.qemu]\ndefault_memory = 4321\n\n[agent.kata]\ndial_timeout = 77\n"),
		HTTPSProxy: "http://proxy.example:3128", NoProxy: "localhost,.svc,10.0.0.0/8",
	}
	r, err := configure.Render(p, target, configure.Options{Kata: o})
	if err != nil {
		t.Fatal(err)
	}
	w, err := hostfs.OpenWritable(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if _, err := configure.Apply(w, r); err != nil {
		t.Fatal(err)
	}

	// The handler as applied, from the drop-in containerd would import.
	var handler string
	for _, f := range r.Host {
		if strings.HasPrefix(f.Path, "etc/containerd/conf.d/") {
			b, err := os.ReadFile(filepath.Join(root, f.Path))
			if err != nil {
				t.Fatal(err)
			}
			handler = string(b)
		}
	}
	shimPath := configure.Paths{Prefix: configure.DefaultPrefix}.Shim(p)
	if !strings.Contains(handler, `runtime_path = "`+shimPath+`"`) {
		t.Fatalf("no handler drop-in with runtime_path %s:\n%s", shimPath, handler)
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "invocations")
	shim := testnode.BuildConfigShim(t, dir, marker, root)
	var tables []string
	for _, l := range strings.Split(handler, "\n") {
		if strings.HasPrefix(l, "version") || strings.HasPrefix(l, "#") {
			continue
		}
		tables = append(tables, strings.Replace(l, shimPath, shim, 1))
	}
	n := testnode.StartRuntime(t, testnode.RuntimeOptions{Runtimes: "\n" + strings.Join(tables, "\n")})

	res, err := cri.ProveSandbox(context.Background(), n.ContainerdSocket, r.Handler, t.TempDir(), 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != cri.SandboxFail || !strings.Contains(res.Error, testnode.FailShimMessage) {
		t.Fatalf("the sandbox did not reach the test shim: %+v", res)
	}
	data, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	var g *shimGiven
	for _, l := range strings.Split(string(data), "\n") {
		if s, ok := strings.CutPrefix(l, testnode.ShimGivenPrefix); ok {
			g = new(shimGiven)
			if err := json.Unmarshal([]byte(s), g); err != nil {
				t.Fatal(err)
			}
		}
	}
	if g == nil {
		t.Fatalf("the shim recorded no runtime options:\n%s", data)
	}
	if g.Error != "" {
		t.Fatalf("the shim could not read what it was given: %s", g.Error)
	}
	want := "/" + r.Host[0].Path
	if g.ConfigPath != want || !strings.Contains(want, "/runtimes/kubeadm-qemu-none/") {
		t.Errorf("containerd handed the shim ConfigPath %q, want %q", g.ConfigPath, want)
	}
	if len(g.DropIns) != 1 || g.DropIns[0] != configure.UserDropInName {
		t.Errorf("drop-ins merged: %v", g.DropIns)
	}
	hv, _ := g.Config["hypervisor"].(map[string]any)["qemu"].(map[string]any)
	agent, _ := g.Config["agent"].(map[string]any)["kata"].(map[string]any)
	if hv["default_memory"] != float64(4321) || agent["dial_timeout"] != float64(77) {
		t.Errorf("the drop-in is not in effect: default_memory %v, dial_timeout %v", hv["default_memory"], agent["dial_timeout"])
	}
	kp, _ := hv["kernel_params"].(string)
	if !strings.Contains(kp, " agent.https_proxy=http://proxy.example:3128 agent.no_proxy=localhost,.svc,10.0.0.0/8") {
		t.Errorf("kernel_params the shim reads: %q", kp)
	}
	t.Logf("containerd handed the shim %s; merged with %v: default_memory %v, kernel_params %q", g.ConfigPath, g.DropIns, hv["default_memory"], kp)
}
