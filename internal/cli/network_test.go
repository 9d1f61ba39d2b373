package cli

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/host/netprobe"
)

// TestNetworkDefaults: --network-timeout's default is netprobe's, which
// berth does not link; and berth without berth-cluster says where the
// network probe lives instead of checking nothing.
func TestNetworkDefaults(t *testing.T) {
	if defaultNetworkTimeout != netprobe.DefaultTimeout {
		t.Errorf("--network-timeout default %v, netprobe.DefaultTimeout %v", defaultNetworkTimeout, netprobe.DefaultTimeout)
	}
	var out, errb strings.Builder
	env := func(string) string { return "" }
	code := Run([]string{"check", "--root", hostsDir + "/sriov-nic-vgpu-host", "--network"}, strings.NewReader(""), &out, &errb, env, Delegate("berth-cluster-absent"))
	if code != ExitUsage || !strings.Contains(errb.String(), "berth-cluster-absent") {
		t.Errorf("exit %d, stderr %q: want %d naming the missing binary", code, errb.String(), ExitUsage)
	}
}
