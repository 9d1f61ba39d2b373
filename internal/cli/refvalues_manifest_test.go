package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kataSNPCmdline is the command line Kata 4.1.0 built for berth's
// kata-qemu-snp configuration (refvalues testdata/kata-cmdline).
const kataSNPCmdline = "tsc=reliable no_timer_check rcupdate.rcu_expedited=1 i8042.direct=1 i8042.dumbkbd=1 i8042.nopnp=1 i8042.noaux=1 noreplace-smp reboot=k cryptomgr.notests net.ifnames=0 pci=lastbus=0 root=/dev/vda1 rootflags=data=ordered,errors=remount-ro ro rootfstype=ext4 console=hvc0 console=hvc1 quiet systemd.show_status=false panic=1 selinux=0 systemd.unit=kata-containers.target systemd.mask=systemd-networkd.service systemd.mask=systemd-networkd.socket scsi_mod.scan=none agent.launch_process_timeout=6 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1"

const (
	mfData    = "../../internal/node/manifest/testdata/"
	mfVectors = mfData + "vectors.yaml"
)

// TestRefvaluesManifest computes the shared vectors with the boot components
// taken from a manifest instead of flags: the values must be the vectors'.
func TestRefvaluesManifest(t *testing.T) {
	data, err := os.ReadFile(mfVectors)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	pin := hex.EncodeToString(sum[:])

	// A cache holding the components under their digests only.
	cache := t.TempDir()
	for _, f := range []string{"OVMF.amdsev.fd", "kernel-synthetic.bin", "initrd-synthetic.bin"} {
		b, err := os.ReadFile(rvData + f)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		p := filepath.Join(cache, "sha256", hex.EncodeToString(h[:]))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty := t.TempDir()

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  []string
	}{
		{
			name: "snp genoa, vector D2",
			args: []string{"--platform", "k3s-qemu-snp-genoa", "--manifest", mfVectors, "--from", rvData, "--vcpus", "1", "--cmdline", "console=ttyS0", "-o", "json"},
			wantOut: []string{`"platform": "k3s-qemu-snp-genoa"`, `"cmdline": "console=ttyS0"`, "cc4b763748e3711e26f95aaaeac8998fad1a749a474502611de7c9164503437e",
				"8acb9ace3be9e302e4fa1d0d5fbc229cd0c916d2e0f3f51eb4628331d01826502ab029b3975d71651a2b0e3e1d1f61b5"},
		},
		{
			name:    "snp unpinned, vector D3 for Turin, manifest pinned by digest",
			args:    []string{"--platform", "kata-qemu-snp", "--manifest", mfVectors + "@sha256:" + pin, "--from", empty, "--from", rvData, "--vcpus", "1-2", "--cmdline", "console=ttyS0"},
			wantOut: []string{"Turin", "fa824b8bc37f716ea24f44e49f9c1d115c3c1f28c17094d060c2b89d8004df3be3a0fa665dff8d39745e564fa0828401"},
		},
		{
			name:    "snp milan from the content-addressed cache, vector D1",
			args:    []string{"--platform", "k3s-qemu-snp-milan", "--manifest", mfVectors, "--cache", cache, "--vcpus", "1", "--cmdline", "console=ttyS0"},
			wantOut: []string{filepath.Join(cache, "sha256"), "a1c7726556779157aa3832440ad60eb8c87886610cdd8a0a08656b7ac1932150140fc5fcf818d27eac84a20b90cca16a"},
		},
		{
			name:    "tdx, vector T1",
			args:    []string{"--platform", "kata-qemu-tdx", "--manifest", mfVectors, "--from", rvData},
			wantOut: []string{"a7a1f751abc454f9cbab198ca8d2edb2821935df525c74182b5e776cb0929e8c59aefecce725b0d08a5e9d3d3183bd08"},
		},
		{
			name:    "tdx two-pass, vector T2",
			args:    []string{"--platform", "kata-qemu-tdx", "--manifest", mfVectors, "--from", rvData, "--page-order", "two-pass"},
			wantOut: []string{"b90b236113eb4c0d4df4ef590568c14e6028a3a31d7e8ac63dee9845df5008d3ebf82d4f5974e933798f65d7a279b9a9"},
		},
		{
			name: "snp: Kata's command line, not the manifest's",
			args: []string{"--platform", "kata-qemu-snp", "--manifest", mfVectors, "--from", rvData, "--vcpus", "1", "-o", "json"},
			wantOut: []string{`"cmdline": "` + kataSNPCmdline + `"`,
				`"cmdlineSource": "Kata 4.1.0 runtime's command line for berth's configuration-qemu-snp.toml, derived by berth"`},
			wantErr: []string{"the manifest's kernelCmdline is not the command line Kata passes", `manifest="console=ttyS0"`},
		},
		{
			name:    "snp: command line from --kata-config",
			args:    []string{"--platform", "kata-qemu-snp", "--manifest", mfVectors, "--from", rvData, "--vcpus", "1", "--kata-config", rvData + "kata-cmdline/configs/snp-agent-params.toml"},
			wantOut: []string{"agent.trace=true agent.debug_console", "(Kata 4.1.0 runtime's command line for " + rvData + "kata-cmdline/configs/snp-agent-params.toml, derived by berth)"},
		},
		{
			name: "snp: --kata-config with drop-ins",
			args: []string{"--platform", "kata-qemu-snp", "--manifest", mfVectors, "--from", rvData, "--vcpus", "1", "--kata-config", rvData + "kata-cmdline/configs/dropin/configuration-qemu-snp.toml"},
			wantOut: []string{"agent.cdh_api_timeout=90 agent.launch_process_timeout=6 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 agent.guest_components_rest_api=all",
				"configuration-qemu-snp.toml with 2 drop-ins of its config.d, derived by berth"},
		},
		{
			name:     "snp: Rust runtime's command line is not derived",
			args:     []string{"--platform", "kata-qemu-snp-runtime-rs", "--manifest", mfVectors, "--from", rvData},
			wantCode: ExitUsage, wantErr: []string{"berth derives the command line of the Go runtime's QEMU guests only; give it with --cmdline"},
		},
		{
			name:     "--kata-config needs --manifest or --installed",
			args:     []string{"--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--kernel", rvData + "kernel-synthetic.bin", "--kata-config", "x.toml"},
			wantCode: ExitUsage, wantErr: []string{"--kata-config applies with --manifest or --installed"},
		},
		{
			name:     "wrong kernel digest",
			args:     []string{"--platform", "kata-qemu-snp", "--manifest", mfData + "vectors-wrong-kernel.yaml", "--from", rvData},
			wantCode: ExitUsage,
			wantErr: []string{"component kernel: ", "kernel-synthetic.bin has sha256 cc4b763748e3711e26f95aaaeac8998fad1a749a474502611de7c9164503437e",
				"expected sha256 cc4b763748e3711e26f95aaaeac8998fad1a749a474502611de7c9164503437f"},
		},
		{
			name: "component not found", args: []string{"--platform", "kata-qemu-snp", "--manifest", mfVectors, "--from", empty},
			wantCode: ExitUsage, wantErr: []string{"component ovmf-amdsev (sha256 3e4fd0b3", "not found", "pass --from DIR"},
		},
		{
			name: "wrong pin", args: []string{"--platform", "kata-qemu-snp", "--manifest", mfVectors + "@sha256:" + strings.Repeat("0", 64), "--from", rvData},
			wantCode: ExitUsage, wantErr: []string{"but the reference pins 0000"},
		},
		{
			name: "url needs a pin", args: []string{"--platform", "kata-qemu-snp", "--manifest", "https://example.invalid/m.yaml"},
			wantCode: ExitUsage, wantErr: []string{"--manifest: manifest URL https://example.invalid/m.yaml is not pinned"},
		},
		{
			name: "pinned url is not fetched yet", args: []string{"--platform", "kata-qemu-snp", "--manifest", "https://example.invalid/m.yaml@sha256:" + pin},
			wantCode: ExitUsage, wantErr: []string{"fetching manifests by URL arrives with berth install"},
		},
		{
			name: "manifest excludes --kernel", args: []string{"--platform", "kata-qemu-snp", "--manifest", mfVectors, "--kernel", "k"},
			wantCode: ExitUsage, wantErr: []string{"--kernel and --manifest exclude each other"},
		},
		{
			name: "bad manifest names the field", args: []string{"--platform", "kata-qemu-snp", "--manifest", rvData + "vectors-snp.psv"},
			wantCode: ExitUsage, wantErr: []string{"vectors-snp.psv: "},
		},
		{
			name: "example manifest: no files for its placeholder digests", args: []string{"--platform", "kata-qemu-snp", "--manifest", "../../examples/manifest-kata.yaml", "--from", rvData, "--cache", ""},
			wantCode: ExitUsage, wantErr: []string{"component ovmf-amdsev", "not found as <sha256>, AMDSEV.fd, ovmf-amdsev in " + rvData},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"refvalues"}, tt.args...)
			if !strings.Contains(strings.Join(tt.args, " "), "--cache") {
				args = append(args, "--cache", "") // never read the machine's cache
			}
			var out, errb bytes.Buffer
			code := run(args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tt.wantCode, errb.String())
			}
			for _, s := range tt.wantOut {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("stderr lacks %q: %s", s, errb.String())
				}
			}
		})
	}
}
