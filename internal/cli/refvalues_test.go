package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

const rvData = "../../internal/node/refvalues/testdata/"

// cliCase is one berth invocation and what it must print.
type cliCase struct {
	name     string
	args     []string
	wantCode int
	wantOut  []string // substrings of stdout
	wantErr  string   // substring of stderr
}

// runCLICase runs berth with args and checks c's exit code, stdout and
// stderr.
func runCLICase(t *testing.T, args []string, c cliCase) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	if code != c.wantCode {
		t.Fatalf("exit code %d, want %d; stderr: %s\nstdout: %s", code, c.wantCode, errb.String(), out.String())
	}
	for _, s := range c.wantOut {
		if !strings.Contains(out.String(), s) {
			t.Errorf("stdout lacks %q:\n%s", s, out.String())
		}
	}
	if c.wantErr != "" && !strings.Contains(errb.String(), c.wantErr) {
		t.Errorf("stderr lacks %q: %s", c.wantErr, errb.String())
	}
}

func TestRefvaluesCmd(t *testing.T) {
	tests := []cliCase{
		{
			name: "snp genoa json matches vector D2",
			args: []string{"refvalues", "--platform", "k3s-qemu-snp-genoa", "--firmware", rvData + "OVMF.amdsev.fd",
				"--kernel", rvData + "kernel-synthetic.bin", "--initrd", rvData + "initrd-synthetic.bin", "--cmdline", "console=ttyS0", "--vcpus", "1", "-o", "json"},
			wantOut: []string{`"schemaVersion": "berth.dev/refvalues/v1"`, `"platform": "k3s-qemu-snp-genoa"`,
				"8acb9ace3be9e302e4fa1d0d5fbc229cd0c916d2e0f3f51eb4628331d01826502ab029b3975d71651a2b0e3e1d1f61b5"},
		},
		{
			name: "snp unpinned gives every product line, vector D3 for Turin",
			args: []string{"refvalues", "--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd",
				"--kernel", rvData + "kernel-synthetic.bin", "--initrd", rvData + "initrd-synthetic.bin", "--cmdline", "console=ttyS0", "--vcpus", "1-2"},
			wantOut: []string{"Milan", "Genoa", "Turin", "fa824b8bc37f716ea24f44e49f9c1d115c3c1f28c17094d060c2b89d8004df3be3a0fa665dff8d39745e564fa0828401"},
		},
		{
			name: "snp vcpu-type and guest features override, vector D6",
			args: []string{"refvalues", "--platform", "k3s-qemu-snp-milan", "--firmware", rvData + "OVMF.amdsev.fd",
				"--kernel", rvData + "kernel-synthetic.bin", "--initrd", rvData + "initrd-synthetic.bin", "--cmdline", "",
				"--vcpus", "4", "--vcpu-type", "EPYC-Genoa", "--guest-features", "0x21"},
			wantOut: []string{"2285db1a406e6ea73f298507184509456d07a7ffc6947e0cae90368c18aa68154496fc7554954cf59107dbe67b5ba78a"},
		},
		{
			name:    "tdx two-pass, vector T2",
			args:    []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "--page-order", "two-pass", "-o", "yaml"},
			wantOut: []string{"pageOrder: two-pass", "b90b236113eb4c0d4df4ef590568c14e6028a3a31d7e8ac63dee9845df5008d3ebf82d4f5974e933798f65d7a279b9a9"},
		},
		{
			name:    "tdx default single-pass, vector T1",
			args:    []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd"},
			wantOut: []string{"single-pass", "a7a1f751abc454f9cbab198ca8d2edb2821935df525c74182b5e776cb0929e8c59aefecce725b0d08a5e9d3d3183bd08"},
		},
		{name: "no platform", args: []string{"refvalues", "--firmware", "x"}, wantCode: ExitUsage, wantErr: "--platform is required"},
		{name: "bad platform", args: []string{"refvalues", "--platform", "nonsense", "--firmware", "x"}, wantCode: ExitUsage, wantErr: "--platform"},
		{name: "non-confidential platform", args: []string{"refvalues", "--platform", "kata-qemu", "--firmware", "x"}, wantCode: ExitUsage, wantErr: "has no TEE"},
		{name: "no firmware", args: []string{"refvalues", "--platform", "kata-qemu-snp"}, wantCode: ExitUsage, wantErr: "--firmware is required (or --manifest)"},
		{name: "zero vcpus", args: []string{"refvalues", "--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--vcpus", "0"}, wantCode: ExitUsage, wantErr: "out of range"},
		{name: "too many vcpus", args: []string{"refvalues", "--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--vcpus", "1-513"}, wantCode: ExitUsage, wantErr: "out of range"},
		{name: "unknown vcpu type", args: []string{"refvalues", "--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--vcpu-type", "Skylake"}, wantCode: ExitUsage, wantErr: "unknown vCPU type"},
		{name: "bad guest features", args: []string{"refvalues", "--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--guest-features", "0xzz"}, wantCode: ExitUsage, wantErr: "--guest-features"},
		{name: "initrd without kernel", args: []string{"refvalues", "--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--initrd", rvData + "initrd-synthetic.bin"}, wantCode: ExitUsage, wantErr: "need --kernel"},
		{name: "page order on snp", args: []string{"refvalues", "--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--page-order", "two-pass"}, wantCode: ExitUsage, wantErr: "TDX platforms only"},
		{name: "policy on tdx", args: []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "--policy", "0x30000"}, wantCode: ExitUsage, wantErr: "SNP platforms only"},
		{name: "bad page order", args: []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "--page-order", "three"}, wantCode: ExitUsage, wantErr: "single-pass or two-pass"},
		{name: "tdx firmware lacks SNP hashes", args: []string{"refvalues", "--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "--kernel", rvData + "kernel-synthetic.bin"}, wantCode: ExitUsage, wantErr: "SNP_KERNEL_HASHES"},
		{name: "kernel is not a firmware", args: []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "kernel-synthetic.bin"}, wantCode: ExitUsage, wantErr: "96b582de-1fb2-45f7-baea-a366c55a082d"},
		{name: "from without manifest", args: []string{"refvalues", "--platform", "kata-qemu-snp", "--from", rvData}, wantCode: ExitUsage, wantErr: "--from and --cache apply with --manifest only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCLICase(t, tt.args, tt) })
	}
}

// TestRefvaluesJSONShape checks the fields an attestation service reads.
func TestRefvaluesJSONShape(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"refvalues", "--platform", "k3s-qemu-snp-turin", "--firmware", rvData + "OVMF.amdsev.fd", "--vcpus", "1-3", "-o", "json"},
		strings.NewReader(""), &out, &errb, func(string) string { return "" })
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc struct {
		SchemaVersion string
		TEE           string
		SNP           struct {
			GuestPolicy string
			Sets        []struct {
				ProductLine   string
				LaunchDigests []struct {
					VCPUs  int
					Digest string
				}
				MinimumTCB struct {
					Status string
					Fields []struct{ Name string }
				}
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SchemaVersion != "berth.dev/refvalues/v1" || doc.TEE != "snp" || doc.SNP.GuestPolicy != "0x30000" {
		t.Errorf("header: %+v", doc)
	}
	if len(doc.SNP.Sets) != 1 || doc.SNP.Sets[0].ProductLine != "Turin" || len(doc.SNP.Sets[0].LaunchDigests) != 3 {
		t.Fatalf("sets: %+v", doc.SNP.Sets)
	}
	for i, ld := range doc.SNP.Sets[0].LaunchDigests {
		if ld.VCPUs != i+1 || len(ld.Digest) != 96 {
			t.Errorf("launch digest %d: %+v", i, ld)
		}
	}
	if tcb := doc.SNP.Sets[0].MinimumTCB; tcb.Status != "operator must confirm" || len(tcb.Fields) == 0 || tcb.Fields[0].Name != "fmc" {
		t.Errorf("Turin TCB: %+v", tcb)
	}
}
