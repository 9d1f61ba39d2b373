package refvalues

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"berth.dev/berth/internal/testkit/goldenfile"
)

// compileSchema compiles one of the schemas derived from the upstream
// projects' own types (testdata/schemas, sources in testdata/SOURCES.md).
func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.NewCompiler().Compile(filepath.Join("testdata", "schemas", name))
	if err != nil {
		t.Fatalf("compiling %s: %v", name, err)
	}
	return s
}

func validate(s *jsonschema.Schema, b []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// genoaTCB is the reported TCB of the Genoa host in fixture
// snp-genoa-k3s-ready (microcode 72, SNP 22, TEE 0, boot loader 9).
var genoaTCB = &NodeTCB{Raw: 0x4816000000000009, Kind: "reported", ProductLine: Genoa, Source: "test"}

func exportDocs(t *testing.T) map[string]*Document {
	t.Helper()
	cmdline := "console=ttyS0"
	docs := map[string]*Document{}
	var err error
	if docs["snp-all-lines"], err = SNP(SNPRequest{
		Firmware: File("testdata/OVMF.amdsev.fd"), Kernel: File("testdata/kernel-synthetic.bin"),
		Initrd: File("testdata/initrd-synthetic.bin"), Cmdline: &cmdline,
		VCPUs: VCPURange{1, 2}, GuestFeatures: DefaultGuestFeatures, GuestPolicy: DefaultGuestPolicy,
		NodeTCBUnknown: "no node facts given",
	}); err != nil {
		t.Fatal(err)
	}
	if docs["snp-genoa-node-tcb"], err = SNP(SNPRequest{
		Firmware: File("testdata/OVMF.amdsev.fd"), Kernel: File("testdata/kernel-synthetic.bin"),
		Initrd: File("testdata/initrd-synthetic.bin"), Cmdline: &cmdline,
		VCPUs: VCPURange{1, 1}, ProductLine: Genoa, GuestFeatures: DefaultGuestFeatures, GuestPolicy: DefaultGuestPolicy,
		NodeTCB: genoaTCB,
	}); err != nil {
		t.Fatal(err)
	}
	if docs["tdx-single-pass"], err = TDX(TDXRequest{Firmware: File("testdata/OVMF.inteltdx.ms.fd")}); err != nil {
		t.Fatal(err)
	}
	// A direct boot of Debian's kernel (BERTH_TDX_KERNEL) on Debian's
	// TDVF with QEMU 7.2's ACPI tables: RTMR0-2 go into both exports.
	debianKernel(t)
	rtmrCmdline := "console=hvc0"
	if docs["tdx-rtmr"], err = TDX(TDXRequest{Firmware: File("testdata/OVMF.debian12u1.fd"), RTMR: &TDXRTMRRequest{
		Kernel: File(os.Getenv("BERTH_TDX_KERNEL")), Cmdline: &rtmrCmdline, MemoryMiB: 2048,
		ACPI: readACPIDir(t, "acpi-qemu7.2-2048"), QEMU: [3]int{7, 2, 22},
	}}); err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestContrastExport validates -o contrast against the schema derived from
// Contrast's ReferenceValues; the same outputs were decoded by Contrast's
// own types with DisallowUnknownFields (SOURCES.md, "Contrast oracle").
func TestContrastExport(t *testing.T) {
	schema := compileSchema(t, "contrast-reference-values.schema.json")
	docs := exportDocs(t)
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			rv, notes, err := doc.Contrast()
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.MarshalIndent(rv, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(schema, b); err != nil {
				t.Fatalf("-o contrast does not validate: %v\n%s", err, b)
			}
			goldenfile.Assert(t, filepath.Join("testdata", "golden", "contrast-"+name+".json"), append(b, '\n'))
			switch name {
			case "snp-all-lines":
				// Turin is not a product Contrast accepts; Milan and
				// Genoa with 2 vCPU counts each remain.
				if len(rv.SNP) != 4 || !strings.Contains(strings.Join(notes, "\n"), "Turin") {
					t.Errorf("entries %d, notes %q: want 4 entries and Turin named as left out", len(rv.SNP), notes)
				}
			case "tdx-rtmr":
				r := docs["tdx-rtmr"].TDX.RTMR.RTMR
				if got := rv.TDX[0].Rtrms; got != [4]string{r[0].String(), r[1].String(), r[2].String(), ""} {
					t.Errorf("Rtrms %q: want RTMR0-2 of the document and an empty RTMR3", got)
				}
			case "snp-genoa-node-tcb":
				tcb := rv.SNP[0].MinimumTCB
				if tcb.BootloaderVersion == nil || *tcb.BootloaderVersion != 9 || *tcb.TEEVersion != 0 || *tcb.SNPVersion != 22 || *tcb.MicrocodeVersion != 72 {
					t.Errorf("MinimumTCB %+v: want the node's 9/0/22/72", tcb)
				}
				if len(notes) != 0 {
					t.Errorf("notes %q: a complete SNP entry needs none", notes)
				}
			}
		})
	}
}

// TestContrastSchemaRejects holds the schema to what Contrast refuses, so
// that a passing TestContrastExport means something.
func TestContrastSchemaRejects(t *testing.T) {
	schema := compileSchema(t, "contrast-reference-values.schema.json")
	good := `{"snp":[{"MinimumTCB":{"BootloaderVersion":9,"TEEVersion":0,"SNPVersion":22,"MicrocodeVersion":72},"ProductName":"Genoa","TrustedMeasurement":"` + strings.Repeat("ab", 48) + `","GuestPolicy":{"SMT":true}}]}`
	if err := validate(schema, []byte(good)); err != nil {
		t.Fatalf("a valid entry is rejected: %v", err)
	}
	for _, tt := range []struct{ name, from, to string }{
		{"unknown field", `"ProductName"`, `"Productname2":1,"ProductName"`},
		{"lower-case berth field name", `"TrustedMeasurement"`, `"trustedMeasurement"`},
		{"product Contrast does not know", `"Genoa"`, `"Turin"`},
		{"short measurement", strings.Repeat("ab", 48), "abcd"},
		{"SVN above 255", `"MicrocodeVersion":72`, `"MicrocodeVersion":256`},
		{"SVN as string", `"MicrocodeVersion":72`, `"MicrocodeVersion":"72"`},
		{"policy as number", `{"SMT":true}`, `196608`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(good, tt.from, tt.to, 1)
			if bad == good {
				t.Fatalf("replacement %q not applied", tt.from)
			}
			if err := validate(schema, []byte(bad)); err == nil {
				t.Errorf("schema accepts %s", bad)
			}
		})
	}
}

// TestRVPSExport validates -o rvps: the message against the schema derived
// from Trustee's Message, its payload (base64, as the sample extractor
// decodes it) against the sample provenance with the names and types
// Trustee's default policy reads.
func TestRVPSExport(t *testing.T) {
	msgSchema := compileSchema(t, "trustee-rvps-message.schema.json")
	sampleSchema := compileSchema(t, "trustee-rvps-sample.schema.json")
	docs := exportDocs(t)
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			msg, _, notes, err := doc.RVPS()
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(msgSchema, b); err != nil {
				t.Fatalf("message does not validate: %v\n%s", err, b)
			}
			payload, err := base64.StdEncoding.DecodeString(msg.Payload)
			if err != nil {
				t.Fatalf("payload is not base64: %v", err)
			}
			if err := validate(sampleSchema, payload); err != nil {
				t.Fatalf("sample provenance does not validate: %v\n%s", err, payload)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, payload, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteString("\n")
			goldenfile.Assert(t, filepath.Join("testdata", "golden", "rvps-"+name+".json"), pretty.Bytes())
			var rv map[string]any
			if err := json.Unmarshal(payload, &rv); err != nil {
				t.Fatal(err)
			}
			_, hasTCB := rv["snp_microcode"]
			switch name {
			case "snp-all-lines":
				if n := len(rv["snp_launch_measurement"].([]any)); n != 6 || hasTCB {
					t.Errorf("%d measurements (want 3 lines x 2 vCPU counts), TCB present %v (want absent)", n, hasTCB)
				}
				if !strings.Contains(strings.Join(notes, "\n"), "snp_microcode: unknown") {
					t.Errorf("notes %q do not name the unknown TCB", notes)
				}
			case "snp-genoa-node-tcb":
				if !hasTCB || rv["snp_microcode"].([]any)[0] != 72.0 || rv["snp_bootloader"].([]any)[0] != 9.0 {
					t.Errorf("TCB from the node missing: %v", rv)
				}
			case "tdx-rtmr":
				r := docs["tdx-rtmr"].TDX.RTMR.RTMR
				if rv["rtmr_1"].([]any)[0] != r[1].String() || rv["rtmr_2"].([]any)[0] != r[2].String() {
					t.Errorf("rtmr_1 %v, rtmr_2 %v: want the document's RTMR1 and RTMR2", rv["rtmr_1"], rv["rtmr_2"])
				}
				if strings.Contains(strings.Join(notes, "\n"), "rtmr_1") {
					t.Errorf("notes %q still call the RTMRs left out", notes)
				}
			case "tdx-single-pass":
				if rv["mr_td"].([]any)[0] != "a7a1f751abc454f9cbab198ca8d2edb2821935df525c74182b5e776cb0929e8c59aefecce725b0d08a5e9d3d3183bd08" {
					t.Errorf("mr_td %v", rv["mr_td"])
				}
			}
		})
	}
}

func TestExportErrors(t *testing.T) {
	turin, err := SNP(SNPRequest{Firmware: File("testdata/OVMF.amdsev.fd"), VCPUs: VCPURange{1, 1}, ProductLine: Turin,
		GuestFeatures: DefaultGuestFeatures, GuestPolicy: DefaultGuestPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := turin.Contrast(); err == nil || !strings.Contains(err.Error(), "Milan, Genoa") {
		t.Errorf("Turin only: %v, want an error naming the products Contrast accepts", err)
	}
	wide, err := SNP(SNPRequest{Firmware: File("testdata/OVMF.amdsev.fd"), VCPUs: VCPURange{1, 1}, ProductLine: Genoa,
		GuestFeatures: DefaultGuestFeatures, GuestPolicy: DefaultGuestPolicy | 1<<30})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := wide.Contrast(); err == nil || !strings.Contains(err.Error(), "0x40000000") {
		t.Errorf("policy bit 30: %v, want an error naming the bit", err)
	}
	for _, f := range []func() error{
		func() error { _, _, err := (&Document{}).Contrast(); return err },
		func() error { _, _, _, err := (&Document{}).RVPS(); return err },
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "neither snp nor tdx") {
			t.Errorf("empty document: %v", err)
		}
	}
}
