package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const genoaHost = "../../testdata/hosts/snp-genoa-k3s-ready"

func runRV(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	return code, out.String(), errb.String()
}

// TestRefvaluesExportAndNodeTCB runs -o rvps, -o contrast and the node TCB
// options through the CLI: stdout carries exactly the verifier's JSON, the
// TCB is the fixture's recorded one, and bad input is an error.
func TestRefvaluesExportAndNodeTCB(t *testing.T) {
	code, factsJSON, errOut := runRV(t, "--root", genoaHost, "facts", "-o", "json")
	if code != 0 {
		t.Fatalf("facts: %d %s", code, errOut)
	}
	factsFile := filepath.Join(t.TempDir(), "facts.json")
	if err := os.WriteFile(factsFile, []byte(factsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"schemaVersion": 1, "tee": {"snp": {"tcb": {"reported": "nonsense"}}}, "cpu": {"productLine": "genoa"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(notJSON, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	snp := []string{"refvalues", "--platform", "k3s-qemu-snp-genoa", "--firmware", rvData + "OVMF.amdsev.fd", "--kernel", rvData + "kernel-synthetic.bin",
		"--initrd", rvData + "initrd-synthetic.bin", "--cmdline", "console=ttyS0", "--vcpus", "1"}
	d2 := "8acb9ace3be9e302e4fa1d0d5fbc229cd0c916d2e0f3f51eb4628331d01826502ab029b3975d71651a2b0e3e1d1f61b5"
	tests := []struct {
		name     string
		args     []string
		wantCode int
		check    func(t *testing.T, out string)
		wantErr  string
	}{
		{name: "contrast with --facts", args: append(append([]string{}, snp...), "--facts", factsFile, "-o", "contrast"), check: func(t *testing.T, out string) {
			var rv struct {
				SNP []struct {
					MinimumTCB         map[string]*int
					ProductName        string
					TrustedMeasurement string
				}
			}
			if err := json.Unmarshal([]byte(out), &rv); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(rv.SNP) != 1 || rv.SNP[0].TrustedMeasurement != d2 || rv.SNP[0].ProductName != "Genoa" || *rv.SNP[0].MinimumTCB["SNPVersion"] != 22 {
				t.Errorf("contrast: %s", out)
			}
		}},
		{name: "rvps with --node", args: append([]string{"--root", genoaHost}, append(append([]string{}, snp...), "--node", "-o", "rvps")...), check: func(t *testing.T, out string) {
			var msg struct{ Version, Type, Payload string }
			if err := json.Unmarshal([]byte(out), &msg); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			p, err := base64.StdEncoding.DecodeString(msg.Payload)
			if err != nil || msg.Version != "0.1.0" || msg.Type != "sample" || !strings.Contains(string(p), d2) || !strings.Contains(string(p), `"snp_bootloader":[9]`) {
				t.Errorf("rvps: %s / %s (%v)", out, p, err)
			}
		}},
		{name: "json without node facts says why", args: append(append([]string{}, snp...), "-o", "json"), check: func(t *testing.T, out string) {
			if !strings.Contains(out, `"reason": "no node facts given (--facts FILE or --node)"`) || !strings.Contains(out, `"status": "operator must confirm"`) {
				t.Errorf("json: %s", out)
			}
		}},
		{name: "node without a recorded TCB says why", args: append([]string{"--root", "../../testdata/hosts/snp-old-firmware"}, append(append([]string{}, snp...), "--node", "-o", "json")...), check: func(t *testing.T, out string) {
			if !strings.Contains(out, "has no SNP TCB: ") || strings.Contains(out, `"status": "from node"`) {
				t.Errorf("json: %s", out)
			}
		}},
		{name: "tdx contrast", args: []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "-o", "contrast"}, check: func(t *testing.T, out string) {
			if !strings.Contains(out, `"MrTd": "a7a1f751abc454f9`) {
				t.Errorf("tdx contrast: %s", out)
			}
		}},
		{name: "contrast refuses Turin only", args: []string{"refvalues", "--platform", "k3s-qemu-snp-turin", "--firmware", rvData + "OVMF.amdsev.fd", "-o", "contrast"}, wantCode: ExitUsage, wantErr: "Milan, Genoa"},
		{name: "unknown output format lists the exports", args: append(append([]string{}, snp...), "-o", "trustee"), wantCode: ExitUsage, wantErr: "rvps, contrast"},
		{name: "facts and node", args: append(append([]string{}, snp...), "--facts", factsFile, "--node"), wantCode: ExitUsage, wantErr: "--facts and --node exclude each other"},
		{name: "facts not json", args: append(append([]string{}, snp...), "--facts", notJSON), wantCode: ExitUsage, wantErr: "not a berth facts document"},
		{name: "facts with a bad TCB", args: append(append([]string{}, snp...), "--facts", bad), wantCode: ExitUsage, wantErr: "tee.snp.tcb.reported"},
		{name: "facts missing", args: append(append([]string{}, snp...), "--facts", "/nonexistent.json"), wantCode: ExitUsage, wantErr: "--facts"},
		{name: "node on tdx", args: []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.inteltdx.ms.fd", "--node"}, wantCode: ExitUsage, wantErr: "SNP platforms only"},
		{name: "prefix without installed", args: append(append([]string{}, snp...), "--prefix", "/opt/x"), wantCode: ExitUsage, wantErr: "--prefix applies with --installed only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runRV(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.wantCode, errOut)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
			if tt.wantErr != "" && (!strings.Contains(errOut, tt.wantErr) || out != "") {
				t.Errorf("stderr lacks %q (or stdout not empty %q): %s", tt.wantErr, out, errOut)
			}
		})
	}
}
