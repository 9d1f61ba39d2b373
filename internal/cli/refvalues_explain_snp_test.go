package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefvaluesExplainSNP compares real SNP reports (relaunched as the
// reference's guest where the test says so) with berth's -o json.
func TestRefvaluesExplainSNP(t *testing.T) {
	dir := t.TempDir()
	run1 := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"refvalues"}, args...), strings.NewReader(""), &out, &errb, func(string) string { return "" })
		return code, out.String(), errb.String()
	}
	code, out, errOut := run1("--platform", "k3s-qemu-snp-genoa", "--firmware", rvData+"OVMF.amdsev.fd", "--kernel", rvData+"kernel-synthetic.bin",
		"--initrd", rvData+"initrd-synthetic.bin", "--cmdline", "console=ttyS0", "--vcpus", "1-2", "-o", "json")
	if code != 0 {
		t.Fatalf("refvalues: %d %s", code, errOut)
	}
	ref := filepath.Join(dir, "ref.json")
	if err := os.WriteFile(ref, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	real, err := os.ReadFile(rvData + "snpreports/trustee-az-genoa-report.bin")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, f func(b []byte)) string {
		b := bytes.Clone(real)
		f(b)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Vector D2: Genoa, 1 vCPU, the synthetic kernel and initrd, console=ttyS0.
	d2, _ := hex.DecodeString("8acb9ace3be9e302e4fa1d0d5fbc229cd0c916d2e0f3f51eb4628331d01826502ab029b3975d71651a2b0e3e1d1f61b5")
	ours := write("ours.bin", func(b []byte) {
		binary.LittleEndian.PutUint64(b[8:], 0x30000)
		copy(b[0x90:], d2)
	})
	hexFile := filepath.Join(dir, "ours.hex")
	b, _ := os.ReadFile(ours)
	if err := os.WriteFile(hexFile, []byte(hex.EncodeToString(b)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  []string
	}{
		{"the reference's guest", []string{"--snp-report", ours, "--reference", ref}, 0, []string{"MEASUREMENT   (offset 0x90)  match", "(Genoa, 1 vCPUs)", "version 3", "(Genoa)"}, nil},
		{"hex report, json", []string{"--snp-report", hexFile, "--reference", ref, "-o", "json"}, 0, []string{`"field": "HOST_DATA"`, `"note": "Genoa, 1 vCPUs"`}, nil},
		{"a real Azure report", []string{"--snp-report", rvData + "snpreports/trustee-az-genoa-report.bin", "--reference", ref}, ExitNotReady,
			[]string{"first difference: POLICY", "minimum ABI 0.31 instead of 0.0", "MEASUREMENT   (offset 0x90)  DIFFERS"}, nil},
		{"malformed", []string{"--snp-report", write("bad.bin", func(b []byte) { b[0x30] = 9 }), "--reference", ref}, ExitUsage, nil,
			[]string{"bad.bin: SNP report: offset 0x30: VMPL: 9, expected 0-3"}},
		{"needs a reference", []string{"--snp-report", ours}, ExitUsage, nil, []string{"--snp-report needs --reference"}},
		{"not with a log", []string{"--snp-report", ours, "--reference", ref, "--log", ours}, ExitUsage, nil, []string{"--log and --snp-report exclude each other"}},
		{"a TDX reference", []string{"--snp-report", ours, "--reference", rvData + "golden/rvps-tdx-rtmr.json"}, ExitUsage, nil, []string{"schemaVersion"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run1(append([]string{"explain"}, tc.args...)...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.wantCode, out, errOut)
			}
			for _, s := range tc.wantOut {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
}
