package nodeinstall

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/testkit/testnode"
	"berth.dev/berth/platform"
)

// criRuntime is the configure.Runtime of a containerd the test started:
// it only answers which handlers are loaded (the verifier restarts
// nothing).
type criRuntime struct{ sock string }

func (r criRuntime) Name() string                  { return "containerd" }
func (r criRuntime) Restart(context.Context) error { return fmt.Errorf("not restarted in this test") }
func (r criRuntime) Log(context.Context) string    { return "" }
func (r criRuntime) Handlers(ctx context.Context) ([]string, error) {
	st, err := cri.Query(ctx, r.sock, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return st.Names(), nil
}

// TestVerifierProvesSandbox is the installer's last step on a real
// containerd: a handler whose sandbox starts stays live, one whose shim
// fails is not live and says the shim's text, and a Kata handler on a host
// whose facts have no /dev/kvm is live with the sandbox skipped, its shim
// never run.
func TestVerifierProvesSandbox(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "invocations")
	n := testnode.StartSandboxHandlers(t, dir, marker)
	noKVM := &facts.Facts{Live: true, Devices: facts.Devices{Nodes: map[string]facts.DeviceNode{"dev/kvm": {Exists: false}}}}
	for _, tc := range []struct {
		platform         string
		live             bool
		sandbox, inError string
		shimRuns         bool
	}{
		{"kubeadm-qemu-none", true, "pass", "", false},
		{"kubeadm-clh-none", false, "fail", testnode.FailShimMessage, true},
		{"kubeadm-qemu-snp", true, "skip", "", false},
	} {
		t.Run(tc.platform, func(t *testing.T) {
			os.Remove(marker)
			p := mustPlatforms(t, tc.platform)[0]
			v := criVerifier{runtimes: map[string]configure.Runtime{p.String(): criRuntime{n.ContainerdSocket}}, handlers: map[string][]string{},
				facts: noKVM, log: slog.New(slog.DiscardHandler),
				sandbox: &SandboxCheck{Socket: func(platform.Layout) cri.Endpoint { return cri.Endpoint{Path: n.ContainerdSocket} }, Timeout: 2 * time.Minute},
				layout:  func(platform.Platform) (platform.Layout, error) { return platform.Layout{}, nil }}
			res, err := v.Verify(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if res.Live != tc.live || res.Sandbox != tc.sandbox || !strings.Contains(res.Error, tc.inError) {
				t.Errorf("verification %+v, want live %v, sandbox %s, error with %q", res, tc.live, tc.sandbox, tc.inError)
			}
			if tc.sandbox == "skip" && !strings.Contains(res.SandboxReason, "/dev/kvm does not exist") {
				t.Errorf("skip without the reason: %+v", res)
			}
			if !tc.live {
				// The Node's Event carries the runtime's text, and the
				// error still counts as a handler not live.
				err := withVerifyErrors(&install.NotLiveError{Platforms: []string{p.String()}, Of: 1}, &install.Outcome{Verified: []configure.Verification{res}})
				if !strings.Contains(err.Error(), tc.inError) || !install.IsFailure(err) {
					t.Errorf("install error %v: lacks %q or is not a failure", err, tc.inError)
				}
			}
			if _, err := os.Stat(marker); (err == nil) != tc.shimRuns {
				t.Errorf("shim run: %v, want %v", err == nil, tc.shimRuns)
			}
		})
	}
}
