package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/goldenfile"
)

const exampleManifest = "../../examples/manifest-kata.yaml"

func TestManifestResolve(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		golden   string
		wantCode int
		wantErr  string
	}{
		{name: "snp genoa", args: []string{"--platform", "k3s-qemu-snp-genoa", "--manifest", exampleManifest}, golden: "resolve-k3s-qemu-snp-genoa.txt"},
		{name: "clh", args: []string{"--platform", "kata-clh", "--manifest", exampleManifest}, golden: "resolve-kata-clh.txt"},
		{name: "tdx gpu json", args: []string{"--platform", "kata-qemu-nvidia-gpu-tdx", "--manifest", exampleManifest, "-o", "json"}, golden: "resolve-kata-qemu-nvidia-gpu-tdx.json"},
		{name: "no platform", args: []string{"--manifest", exampleManifest}, wantCode: ExitUsage, wantErr: "--platform and --manifest are required"},
		{name: "bad platform", args: []string{"--platform", "kata-xen", "--manifest", exampleManifest}, wantCode: ExitUsage, wantErr: "--platform"},
		{name: "unpinned url", args: []string{"--platform", "kata-clh", "--manifest", "https://example.invalid/m.yaml"}, wantCode: ExitUsage, wantErr: "is not pinned"},
		{name: "missing file", args: []string{"--platform", "kata-clh", "--manifest", "testdata/manifest/none.yaml"}, wantCode: ExitUsage, wantErr: "none.yaml"},
		{name: "ambiguous boot", args: []string{"--platform", "kata-qemu-snp", "--manifest", "testdata/manifest/two-kernels.yaml"}, wantCode: ExitUsage,
			wantErr: "platform kubeadm-qemu-snp is served by 2 components with role kernel (kernel-a, kernel-b)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"manifest", "resolve"}, tt.args...), strings.NewReader(""), &out, &errb, func(string) string { return "" })
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tt.wantCode, errb.String())
			}
			if tt.wantErr != "" && !strings.Contains(errb.String(), tt.wantErr) {
				t.Errorf("stderr lacks %q: %s", tt.wantErr, errb.String())
			}
			if tt.golden != "" {
				goldenfile.Assert(t, filepath.Join("testdata", "manifest", tt.golden), out.Bytes())
			}
		})
	}
}

func TestManifestResolveJSONShape(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"manifest", "resolve", "--platform", "kata-qemu-snp", "--manifest", exampleManifest, "-o", "json"},
		strings.NewReader(""), &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var plan struct {
		Platform   string
		Bytes      int64
		AllBytes   int64
		Components []struct{ Name, SHA256 string }
		Boot       struct {
			Firmware      struct{ Name string }
			KernelCmdline string
		}
	}
	if err := json.Unmarshal(out.Bytes(), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Platform != "kubeadm-qemu-snp" || plan.Bytes <= 0 || plan.Bytes >= plan.AllBytes || len(plan.Components) == 0 ||
		plan.Boot.Firmware.Name != "ovmf-amdsev" || plan.Boot.KernelCmdline == "" {
		t.Errorf("plan: %+v", plan)
	}
	// The SRI digest of the example's firmware comes out as hex.
	for _, c := range plan.Components {
		if len(c.SHA256) != 64 {
			t.Errorf("%s: digest %q not hex", c.Name, c.SHA256)
		}
	}
}

func TestManifestSchema(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"manifest", "schema"}, strings.NewReader(""), &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["$id"] == nil {
		t.Fatalf("schema is not JSON with an $id: %v", err)
	}
}
