package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/platform"
)

func runPlatforms(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	return code, out.String(), errb.String()
}

func TestPlatformsGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"platforms/list.txt", []string{"platforms"}},
		{"platforms/list.json", []string{"platforms", "-o", "json"}},
		{"platforms/rules.txt", []string{"platforms", "rules"}},
		{"platforms/rules.yaml", []string{"platforms", "rules", "-o", "yaml"}},
		{"platforms/explain-k3s-snp-genoa-gpu.txt", []string{"platforms", "explain", "k3s-qemu-snp-genoa+gpu"}},
		{"platforms/explain-k3s-snp-genoa-gpu.json", []string{"platforms", "explain", "K3s-QEMU-SNP-GENOA+GPU", "-o", "json"}},
		{"platforms/explain-kata-qemu.txt", []string{"platforms", "explain", "kata-qemu"}},
		{"platforms/explain-coco-dev.txt", []string{"platforms", "explain", "kata-qemu-coco-dev"}},
		{"platforms/explain-fc.yaml", []string{"platforms", "explain", "k0s-fc-none+blockfile+debug", "-o", "yaml"}},
		{"platforms/explain-aks.txt", []string{"platforms", "explain", "AKS-CLH-SNP"}},
		{"platforms/explain-openshift-tdx.txt", []string{"platforms", "explain", "dist=openshift,hv=qemu,tee=tdx"}},
		{"platforms/explain-custom.txt", []string{"platforms", "explain", "custom-clh-none"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			code, out, stderr := runPlatforms(t, tt.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			goldenfile.Assert(t, filepath.Join("testdata", tt.golden), []byte(out))
			if strings.HasSuffix(tt.golden, ".txt") {
				for i, line := range strings.Split(out, "\n") {
					if len(line) > 80 {
						t.Errorf("line %d is %d columns wide: %q", i+1, len(line), line)
					}
				}
			}
		})
	}
}

func TestPlatformsJSONCoversAll(t *testing.T) {
	code, out, _ := runPlatforms(t, "platforms", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var views []struct {
		Platform         string `json:"platform"`
		KataRuntimeClass string `json:"kataRuntimeClass"`
	}
	if err := json.Unmarshal([]byte(out), &views); err != nil {
		t.Fatal(err)
	}
	all := platform.All()
	if len(views) != len(all) {
		t.Fatalf("%d platforms in JSON, %d valid", len(views), len(all))
	}
	for i, v := range views {
		if v.Platform != all[i].String() || v.KataRuntimeClass != all[i].KataRuntimeClass() {
			t.Errorf("entry %d = %+v, want %s", i, v, all[i])
		}
	}
}

func TestPlatformsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"platforms", "explain", "aks-qemu-tdx"}, "[aks-mshv]"},
		{[]string{"platforms", "explain", "k3s-firecracker-snp"}, "k3s-qemu-snp"},
		{[]string{"platforms", "explain", "nonsense"}, "[syntax]"},
		{[]string{"platforms", "explain"}, "exactly one platform name"},
		{[]string{"platforms", "explain", "a", "b"}, "exactly one platform name"},
		{[]string{"platforms", "surplus"}, "takes no arguments"},
		{[]string{"platforms", "-o", "xml"}, "unknown output format"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, stderr := runPlatforms(t, tt.args...)
			if code != ExitUsage {
				t.Errorf("exit %d, want %d", code, ExitUsage)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
		})
	}
}
