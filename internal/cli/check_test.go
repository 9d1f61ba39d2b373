package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/internal/testkit/testhosts"
)

const hostsDir = "../../testdata/hosts"

// fixedEnv pins the clock of berth check for reproducible output.
func fixedEnv(k string) string {
	if k == "SOURCE_DATE_EPOCH" {
		return "1767225600" // 2026-01-01T00:00:00Z
	}
	return ""
}

func runCheckCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb, fixedEnv)
	return code, out.String(), errb.String()
}

// themePlatform is the platform shown in detail for a fixture.
func themePlatform(name string) string {
	switch {
	case strings.HasPrefix(name, "snp-"):
		return "kata-qemu-snp"
	case strings.HasPrefix(name, "tdx-"):
		return "kata-qemu-tdx"
	case strings.HasPrefix(name, "gpu-"):
		return "kata-qemu-nvidia-gpu"
	case strings.HasPrefix(name, "h100-snp-"):
		return "k3s-qemu-snp+gpu" // the H100 fixtures run k3s
	case strings.HasPrefix(name, "hgx-h100-tdx"):
		return "kata-qemu-nvidia-gpu-tdx"
	}
	return "kata-qemu"
}

// TestCheckGolden renders the matrix and one detailed platform per fixture
// host as a table and as JSON. The matrix JSON golden keeps the verdicts
// without their findings (all findings are in the detail golden), so that
// the files stay reviewable.
func TestCheckGolden(t *testing.T) {
	testkit.NeedsRoot(t, "the goldens, which record the fixtures' owner (root in CI; uid 0),")
	for _, name := range testhosts.Names(t) {
		t.Run(name, func(t *testing.T) {
			root := filepath.Join(hostsDir, name)
			dir := filepath.Join("testdata", "check", name)
			for _, tc := range []struct {
				file string
				args []string
			}{
				{"matrix.txt", nil},
				{"matrix.json", []string{"-o", "json"}},
				{"detail.txt", []string{"--platform", themePlatform(name)}},
				{"detail.json", []string{"--platform", themePlatform(name), "-o", "json"}},
			} {
				args := append([]string{"check", "--root", root}, tc.args...)
				code, out, stderr := runCheckCLI(t, args...)
				if code != 0 && code != 1 {
					t.Fatalf("%v: exit %d: %s", args, code, stderr)
				}
				if strings.HasSuffix(tc.file, ".txt") {
					for i, l := range strings.Split(out, "\n") {
						if n := len([]rune(l)); n > 80 {
							t.Errorf("%s line %d is %d columns: %q", tc.file, i+1, n, l)
						}
					}
				}
				if tc.file == "matrix.json" {
					out = stripFindings(t, out)
				}
				goldenfile.Assert(t, filepath.Join(dir, tc.file), []byte(out))
			}
		})
	}
}

func stripFindings(t *testing.T, s string) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		t.Fatalf("check -o json: %v", err)
	}
	for _, v := range doc["verdicts"].([]any) {
		delete(v.(map[string]any), "findings")
	}
	// Since report schema 2 the findings are listed once, beside the
	// verdicts.
	delete(doc, "findings")
	delete(doc, "findingLists")
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestCheckExitCodes(t *testing.T) {
	ready := filepath.Join(hostsDir, "snp-genoa-k3s-ready")
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"check", "--root", ready, "--platform", "k3s-qemu-snp"}, 0},
		{[]string{"check", "--root", ready, "--platform", "k3s-qemu-snp", "--platform", "k3s-qemu-tdx"}, 1},
		{[]string{"check", "--root", ready, "--platform", "k3s-qemu-tdx", "--ignore", "all"}, 0},
		{[]string{"check", "--root", ready, "--platform", "k3s-qemu-tdx", "--ignore", "TDX.CPU.Generation"}, 1},
		{[]string{"check", "--root", ready, "--platform", "k3s-qemu-tdx", "--ignore", "tdx.cpu.generation,tdx.bios.keyids,tdx.sgx,tdx.kernel.version,hypervisor.version,hypervisor.functional"}, 0},
		{[]string{"check", "--root", ready, "--platform", "k3s-qemu-snp", "--strict"}, 1},
		{[]string{"check", "--root", ready}, 0},
		{[]string{"check", "--root", filepath.Join(hostsDir, "cloud-vm-no-nested")}, 1},
		{[]string{"check", "--root", ready, "--platform", "k3s-qemu-sev"}, 2},
		{[]string{"check", "--root", ready, "--ignore", "all,kvm.module"}, 2},
		{[]string{"check", "--root", ready, "--ignore", "kvm.modul"}, 2},
		{[]string{"check", "--root", ready, "-o", "xml"}, 2},
		{[]string{"check", "--root", ready, "--all", "--platform", "k3s-qemu-snp"}, 2},
		{[]string{"check", "explain", "kvm.device.usable"}, 0},
		{[]string{"check", "explain", "kvm.nope"}, 2},
	}
	for _, tt := range tests {
		if code, _, stderr := runCheckCLI(t, tt.args...); code != tt.want {
			t.Errorf("%v: exit %d, want %d (%s)", tt.args, code, tt.want, stderr)
		}
	}
}

func TestCheckNFD(t *testing.T) {
	code, out, stderr := runCheckCLI(t, "check", "--root", filepath.Join(hostsDir, "snp-genoa-k3s-ready"), "-o", "nfd", "--nfd-expiry", "24h")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if len(out) > 64<<10 {
		t.Errorf("feature file is %d bytes, over 64 KiB", len(out))
	}
	for _, want := range []string{"# +expiry-time=2026-01-02T00:00:00Z\n", "berth.dev/tee=snp\n", "berth.dev/platform.k3s-qemu-snp=true\n", "berth.dev/platform.k3s-qemu-tdx=false\n",
		"amd.feature.node.kubernetes.io/snp=true\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("NFD output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "intel.feature.node.kubernetes.io/tdx") {
		t.Errorf("NFD output labels TDX on an SNP host:\n%s", out)
	}
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(l, "#") && !strings.Contains(l, "=") {
			t.Errorf("line %d %q is neither a comment nor name=value", i+1, l)
		}
	}
}
