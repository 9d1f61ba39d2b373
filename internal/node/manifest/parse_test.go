package manifest

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func yamlToJSON(s string) ([]byte, error) { return yaml.YAMLToJSON([]byte(s)) }

// good is a minimal valid manifest; the error cases edit one line of it.
const good = `apiVersion: berth.dev/manifest/v1
name: test
version: "1"
components:
  - name: shim
    version: "1"
    sources: [https://example.invalid/shim]
    sha256: 3e4fd0b3fe3b2dbe481c3d9e99418a034174f26cbe1f55aa212b0f18c12d2d6f
    size: 10
    path: bin/shim
    mode: "0755"
  - name: data
    version: "1"
    role: data
    sources: [https://example.invalid/data.tar.zst]
    sha256: 3e4fd0b3fe3b2dbe481c3d9e99418a034174f26cbe1f55aa212b0f18c12d2d6f
    size: 10
    serves: {hypervisor: qemu}
    archive:
      type: tar.zst
      members:
        - {name: ./opt/kata/share/a.bin, path: share/a.bin, mode: "0644"}
measured:
  - serves: {tee: snp}
    kernelCmdline: console=ttyS0
`

func TestParseGood(t *testing.T) {
	m, err := Parse([]byte(good), "good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Components) != 2 || m.Components[1].Archive.Members[0].Path != "share/a.bin" || FileMode(m.Components[0].Mode) != 0o755 {
		t.Errorf("parsed %+v", m)
	}
	if m.Source() != "good.yaml" {
		t.Errorf("source %q", m.Source())
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, old, new string // replace old by new in good ("" old: whole document is new)
		want           string
	}{
		{"empty", "", " \n", "good.yaml: empty manifest"},
		{"not yaml", "", "a: [", "not valid YAML or JSON"},
		{"not a mapping", "", "- a\n- b\n", "expected a mapping with apiVersion"},
		{"duplicate key", `name: test`, "name: test\nname: again", "not valid YAML or JSON"},
		{"api version", "berth.dev/manifest/v1", "berth.dev/manifest/v2", `apiVersion: got "berth.dev/manifest/v2", expected "berth.dev/manifest/v1"`},
		{"unknown top-level field", `name: test`, "name: test\nextra: 1", `top level: unknown field "extra"`},
		{"no name", `name: test`, `name: ""`, "name: missing"},
		{"no version", `version: "1"` + "\ncomponents", "components", "version: missing"},
		{"no components", "components:\n  - name: shim", "components: []\nx:\n  - name: shim", "unknown field"},
		{"unknown component field", "    size: 10\n    path: bin/shim", "    size: 10\n    sha265: x\n    path: bin/shim", `components[0]: unknown field "sha265"`},
		{"size type", "    size: 10\n    path: bin/shim", "    size: ten\n    path: bin/shim", "components[0].size: expected an integer, got string"},
		{"sources type", "sources: [https://example.invalid/shim]", "sources: https://example.invalid/shim", "components[0].sources: expected a list, got string"},
		{"bad name", "name: shim", "name: Shim", `components[0].name: "Shim"`},
		{"duplicate name", "name: data", "name: shim", "components[1].name: \"shim\" is already the name of components[0]"},
		{"no component version", "  - name: shim\n    version: \"1\"", "  - name: shim\n    version: \" \"", "components[0].version: missing"},
		{"bad role", "role: data", "role: bios", `components[1].role: "bios": expected one of firmware, kernel`},
		{"no sources", "sources: [https://example.invalid/shim]", "sources: []", "components[0].sources: missing"},
		{"bad source", "sources: [https://example.invalid/shim]", "sources: [https://example.invalid/shim, /tmp/shim]", `components[0].sources[1]: "/tmp/shim": expected an http or https URL`},
		{"bad sha256", "    sha256: 3e4fd0b3fe3b2dbe481c3d9e99418a034174f26cbe1f55aa212b0f18c12d2d6f\n    size: 10\n    path", "    sha256: 3e4f\n    size: 10\n    path", `components[0].sha256: "3e4f" is not a SHA-256 digest: expected 64 hex digits`},
		{"zero size", "    size: 10\n    path", "    size: 0\n    path", "components[0].size: 0: expected the download's size"},
		{"size above 1 TiB", "    size: 10\n    path", "    size: 1099511627777\n    path", "components[0].size: 1099511627777: expected the download's size in bytes (> 0, at most 1 TiB)"},
		{"no path", "    path: bin/shim\n", "", "components[0].path: missing"},
		{"absolute path", "path: bin/shim", "path: /usr/bin/shim", `components[0].path: "/usr/bin/shim": expected a clean relative path`},
		{"escaping path", "path: bin/shim", "path: bin/../../shim", "components[0].path: \"bin/../../shim\""},
		{"unquoted mode", `mode: "0755"`, "mode: 0755", "components[0].mode: expected a string, got number"},
		{"bad mode", `mode: "0755"`, `mode: "4755"`, `components[0].mode: "4755": expected four octal digits`},
		{"no mode", "    mode: \"0755\"\n", "", "components[0].mode: missing"},
		{"path with archive", "    serves: {hypervisor: qemu}\n", "    serves: {hypervisor: qemu}\n    path: x\n", "components[1]: path and mode belong to archive.members"},
		{"measured role in archive", "role: data", "role: kernel", "components[1].archive: a kernel must be a plain file"},
		{"archive type", "type: tar.zst", "type: zip", `components[1].archive.type: "zip": expected one of tar, tar.gz, tar.zst`},
		{"no members", "      members:\n        - {name: ./opt/kata/share/a.bin, path: share/a.bin, mode: \"0644\"}", "      members: []", "components[1].archive.members: missing"},
		{"member name", "name: ./opt/kata/share/a.bin", "name: ../a.bin", `components[1].archive.members[0].name: "../a.bin"`},
		{"member path", "path: share/a.bin", "path: share//a.bin", `components[1].archive.members[0].path: "share//a.bin"`},
		{"member mode", `mode: "0644"}`, `mode: "644"}`, `components[1].archive.members[0].mode: "644"`},
		{"serves type", "serves: {hypervisor: qemu}", "serves: qemu", "components[1].serves: expected a mapping of dimension"},
		{"unknown dimension", "serves: {hypervisor: qemu}", "serves: {hypervsor: qemu}", "components[1].serves.hypervsor: unknown dimension: expected one of distribution, hypervisor"},
		{"unknown hypervisor", "serves: {hypervisor: qemu}", "serves: {hypervisor: [qemu, xen]}", `components[1].serves.hypervisor[1]: `},
		{"empty list", "serves: {hypervisor: qemu}", "serves: {hypervisor: []}", "components[1].serves.hypervisor: expected a value or a non-empty list"},
		{"any product line", "serves: {hypervisor: qemu}", "serves: {productLine: any}", `components[1].serves.productLine[0]: "any" is not a product line`},
		{"gpu type", "serves: {hypervisor: qemu}", "serves: {gpu: nvidia}", "components[1].serves.gpu: expected true or false"},
		{"measured serves", "  - serves: {tee: snp}", "  - serves: {tee: sev}", "measured[0].serves.tee[0]: "},
		{"no cmdline", "    kernelCmdline: console=ttyS0\n", "", "measured[0].kernelCmdline: missing"},
		{"unknown measured field", "kernelCmdline: console", "cmdline: console", `measured[0]: unknown field "cmdline"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := tt.new
			if tt.old != "" {
				if !strings.Contains(good, tt.old) {
					t.Fatalf("test is stale: %q not in the good manifest", tt.old)
				}
				doc = strings.Replace(good, tt.old, tt.new, 1)
			}
			_, err := Parse([]byte(doc), "good.yaml")
			if err == nil {
				t.Fatalf("no error for\n%s", doc)
			}
			if !strings.HasPrefix(err.Error(), "good.yaml: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error:\n  %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	if _, err := Parse(make([]byte, MaxSize+1), "big"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("error %v", err)
	}
}
