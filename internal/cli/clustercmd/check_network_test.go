package clustercmd

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckNetworkFlags runs check --network where it runs: berth-cluster
// (berth delegates it, TestDelegation).
func TestCheckNetworkFlags(t *testing.T) {
	root := filepath.Join("../../../testdata/hosts", "sriov-nic-vgpu-host")
	tests := []struct {
		name   string
		args   []string
		code   int
		output string // in stdout (or stderr for usage errors)
	}{
		{"--registry needs --network", []string{"--registry", "quay.io"}, 2, "--registry needs --network"},
		{"--attestation-url needs --network", []string{"--attestation-url", "https://kbs.example"}, 2, "--attestation-url needs --network"},
		{"--network-timeout needs --network", []string{"--network-timeout", "1s"}, 2, "--network-timeout needs --network"},
		{"zero timeout", []string{"--network", "--network-timeout", "0s"}, 2, "expected a positive duration"},
		{"bad registry", []string{"--network", "--registry", "ftp://mirror"}, 2, `scheme "ftp"`},
		{"bad attestation URL", []string{"--network", "--attestation-url", "https://"}, 2, "no host"},
		{"offline root skips the probes", []string{"--network", "--attestation-url", "https://kbs.example:8080", "-p", "kata-qemu-snp", "-o", "json"}, 1,
			"not checked (offline root: the network seen from here is not the host's)"},
		{"without --network", []string{"-p", "kata-qemu", "-o", "json"}, 0, "not checked (--network not given)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"check", "--root", root}, tt.args...)
			code, stdout, stderr := runCLI(t, args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (%s)", code, tt.code, stderr)
			}
			if !strings.Contains(stdout+stderr, tt.output) {
				t.Errorf("output does not mention %q:\n%s%s", tt.output, stdout, stderr)
			}
		})
	}
}
