package discover

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"testing"
)

func gz(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

func TestRunKernel(t *testing.T) {
	root := coreRoot(t, map[string]string{
		"proc/sys/kernel/osrelease":                             "6.8.0-45-generic\n",
		"proc/cmdline":                                          "BOOT_IMAGE=/vmlinuz kvm_amd.sev_snp=1 iommu=pt\n",
		"proc/modules":                                          "kvm_amd 245760 0 - Live 0x0000000000000000\nkvm 1388544 1 kvm_amd, Live 0x0000000000000000\nccp 155648 1 kvm_amd, Live 0x0000000000000000\n",
		"sys/module/kvm_amd/initstate":                          "live\n",
		"sys/module/kvm_amd/parameters/sev_snp":                 "Y\n",
		"sys/module/kvm_amd/parameters/nested":                  "1\n",
		"sys/module/vfio/parameters/enable_unsafe_noiommu_mode": "N\n",
		"lib/modules/6.8.0-45-generic/modules.builtin":          "kernel/drivers/vfio/vfio.ko\nkernel/fs/fuse/fuse.ko\n",
		"proc/config.gz":                                        gz("CONFIG_KVM=m\nCONFIG_KVM_AMD_SEV=y\n# CONFIG_INTEL_TDX_HOST is not set\nCONFIG_LOCALVERSION=\"\"\n"),
		"var/log/dmesg":                                         "[    1.000] kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)\n[    1.1] unrelated\n",
	})
	f, u := runSub(t, root, runKernel)
	k := f.Kernel
	if k.Release != "6.8.0-45-generic" || !strings.Contains(k.Cmdline, "sev_snp") {
		t.Errorf("release/cmdline: %+v", k)
	}
	if m := k.Modules["kvm_amd"]; !m.Loaded || m.Params["sev_snp"] != "Y" || m.Params["nested"] != "1" {
		t.Errorf("kvm_amd = %+v", m)
	}
	if m := k.Modules["vfio"]; !m.Builtin || m.Loaded {
		t.Errorf("vfio = %+v", m)
	}
	if _, ok := k.Modules["kvm_intel"]; ok {
		t.Errorf("kvm_intel reported")
	}
	if k.ConfigSource != "proc/config.gz" || k.Config["KVM"] != "m" || k.Config["INTEL_TDX_HOST"] != "n" || k.Config["VFIO"] != "n" {
		t.Errorf("config %s %v", k.ConfigSource, k.Config)
	}
	if len(k.BootLog) != 1 || k.BootLogSource != "var/log/dmesg" {
		t.Errorf("boot log %q from %s", k.BootLog, k.BootLogSource)
	}
	if len(u) != 0 {
		t.Errorf("unknown: %v", u)
	}
}

func TestRunKernelBadInput(t *testing.T) {
	root := coreRoot(t, map[string]string{
		"proc/sys/kernel/osrelease": "6.1\n",
		"proc/modules":              "kvm\n",
		"proc/config.gz":            "not gzip",
		"boot/config-6.1":           "CONFIG_KVM=y\ngarbage\n",
	})
	_, u := runSub(t, root, runKernel)
	for field, want := range map[string]string{
		"kernel.modules": "unparseable: proc/modules:1",
		"kernel.config":  "boot/config-6.1:2",
		"kernel.bootLog": "missing: dmesg",
		"kernel.cmdline": "missing: proc/cmdline",
	} {
		if !strings.Contains(u[field], want) {
			t.Errorf("%s = %q, want it to contain %q", field, u[field], want)
		}
	}
	if !strings.Contains(u["kernel.config"], "proc/config.gz") {
		t.Errorf("kernel.config reason lacks the gzip failure: %q", u["kernel.config"])
	}
}

func TestParamBool(t *testing.T) {
	for in, want := range map[string]bool{"Y": true, "y": true, "y\n": true, "Y\n": true, "1": true, "N": false, "n": false, "0": false} {
		if got, ok := ParamBool(in); !ok || got != want {
			t.Errorf("ParamBool(%q) = %v, %v; want %v, true", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "yes", "2", "on", "maybe"} {
		if _, ok := ParamBool(in); ok {
			t.Errorf("ParamBool(%q) accepted", in)
		}
	}
}

func FuzzParseProcModules(f *testing.F) {
	f.Add([]byte("kvm_amd 245760 0 - Live 0x0\nkvm 1388544 1 kvm_amd, Live 0x0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseProcModules(b)
		parseModulesBuiltin(b)
	})
}

func FuzzParseModuleParam(f *testing.F) {
	f.Add([]byte("Y\n"))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v := parseModuleParam(b)
		if len(v) > 256*3 {
			t.Fatalf("param too long: %d", len(v))
		}
		ParamBool(v)
	})
}

func FuzzParseKernelConfig(f *testing.F) {
	f.Add([]byte("CONFIG_KVM=y\n# CONFIG_KVM_INTEL is not set\nCONFIG_X=\"a b\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := parseKernelConfig(b)
		if err == nil && len(cfg) != len(configOfInterest) {
			t.Fatalf("config has %d options, want %d", len(cfg), len(configOfInterest))
		}
	})
}

func TestParseKernelConfig(t *testing.T) {
	for _, tc := range []struct {
		text    string
		want    map[string]string // options of interest checked
		wantErr string
	}{
		{"CONFIG_KVM=y\r\n# CONFIG_KVM_INTEL is not set\n\n  CONFIG_KVM_AMD=m  \nCONFIG_OTHER=\"x\"",
			map[string]string{"KVM": "y", "KVM_INTEL": "n", "KVM_AMD": "m", "VFIO": "n"}, ""},
		{"CONFIG_X86_SGX=\"quoted\"\nCONFIG_TUN=", map[string]string{"X86_SGX": "quoted", "TUN": ""}, ""},
		{"CONFIG_KVM=y\n\nnot a config line\n", nil, "line 3: expected CONFIG_NAME=value"},
		{"CONFIG_=y\n", nil, "line 1: expected CONFIG_NAME=value"},
	} {
		cfg, err := parseKernelConfig([]byte(tc.text))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.text, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.text, err)
			continue
		}
		for k, v := range tc.want {
			if cfg[k] != v {
				t.Errorf("%q: %s = %q, want %q", tc.text, k, cfg[k], v)
			}
		}
	}
}

// TestParseKernelConfigGzip parses a real config.gz (the build machine's
// snapshot fixture) as it is decompressed, through buffers of several
// sizes, and compares the options with those of the whole text parsed at
// once; then the errors, whose line numbers must not depend on where a
// buffer ends.
func TestParseKernelConfigGzip(t *testing.T) {
	real, err := os.ReadFile("../../../testdata/hosts/buildmachine-firecracker/proc/config.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(real))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(text) < 4*configChunk {
		t.Fatalf("the fixture's config is %d bytes; the test wants several buffers' worth", len(text))
	}
	want, err := parseKernelConfig(text)
	if err != nil {
		t.Fatal(err)
	}
	if want["KVM"] == "n" {
		t.Fatalf("the fixture's config has no KVM: %v", want)
	}
	for _, chunk := range []int{256, 257, 4096, configChunk} {
		got, err := parseKernelConfigGzipChunk(real, chunk)
		if err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("chunk %d: got %v, want %v", chunk, got, want)
		}
	}

	bad := string(text) + "not a config line\nCONFIG_KVM=y\n"
	badLine := strings.Count(string(text), "\n") + 1
	for _, tc := range []struct {
		name, text string
		chunk      int
		wantErr    string
	}{
		{"bad line after many buffers", bad, 97, fmt.Sprintf("line %d: expected CONFIG_NAME=value", badLine)},
		{"bad line, default buffer", bad, configChunk, fmt.Sprintf("line %d: expected CONFIG_NAME=value", badLine)},
		{"bad last line without newline", "CONFIG_KVM=y\nnope", 16, "line 2: expected CONFIG_NAME=value"},
		{"line longer than the buffer", "CONFIG_KVM=y\nCONFIG_CMDLINE=\"" + strings.Repeat("x", 100) + "\"\n", 64, "line 2: longer than 64 bytes"},
		{"larger than the cap", strings.Repeat("# comment\n", maxConfigSize/10+1), configChunk, "larger than"},
		{"not gzip", "", configChunk, "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(gz(tc.text))
			if tc.name == "not gzip" {
				in = []byte("CONFIG_KVM=y\n")
			}
			_, err := parseKernelConfigGzipChunk(in, tc.chunk)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func FuzzParseKernelConfigGzip(f *testing.F) {
	f.Add([]byte("CONFIG_KVM=y\n# CONFIG_KVM_INTEL is not set\nCONFIG_X=\"a b\"\n"), uint8(7))
	f.Add([]byte("CONFIG_KVM=y\r\n\nCONFIG_VFIO=m"), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, c uint8) {
		chunk := int(c) + 16
		whole, werr := parseKernelConfig(b)
		got, err := parseKernelConfigGzipChunk([]byte(gz(string(b))), chunk)
		if err != nil {
			var le *lineError
			if errors.As(err, &le) && strings.Contains(le.msg, "longer than") {
				return // the whole-text parser has no line limit
			}
			if werr == nil || err.Error() != werr.Error() {
				t.Fatalf("chunk %d: error %v, whole text: %v", chunk, err, werr)
			}
			return
		}
		if werr != nil || !maps.Equal(got, whole) {
			t.Fatalf("chunk %d: got %v, whole text %v (%v)", chunk, got, whole, werr)
		}
	})
}
