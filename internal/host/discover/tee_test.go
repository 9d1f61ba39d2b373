package discover

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

func rng(lo, hi int) *facts.Range { return &facts.Range{Min: lo, Max: hi} }
func ip(n int) *int               { return &n }
func bp(b bool) *bool             { return &b }

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The boot logs below are quoted from /work/shared/reference/samples
// (amd_snp_*.txt, amd_sev_sysfs_int_style_old_amdsev_readme.txt); they go
// through filterBootLog as in discovery.
func TestParseSNPLog(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want facts.SNP
	}{
		{
			name: "genoa upstream 6.9 (hb-os)",
			log: `[    0.000000] SEV-SNP: RMP table physical range [0x000000601d200000 - 0x000000607dafffff]
[    0.003786] SEV-SNP: Reserving start/end of RMP table on a 2MB boundary [0x000000607da00000]
[    4.246111] AMD-Vi: IOMMU SNP support enabled.
[    4.630436] AMD-Vi: Extended features (0xa5bf7320a2294aee, 0x1d): PPR X2APIC NX [5] IA GA PC GA_vAPIC SNP
[    4.651376] AMD-Vi: Force to disable Virtual APIC due to SNP
[    9.628320] ccp 0000:01:00.5: sev enabled
[   13.720990] ccp 0000:01:00.5: SEV API:1.55 build:38
[   13.721003] ccp 0000:01:00.5: SEV-SNP API:1.55 build:38
[   13.734549] kvm_amd: SEV enabled (ASIDs 100 - 1006)
[   13.734552] kvm_amd: SEV-ES enabled (ASIDs 1 - 99)
[   13.734555] kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)`,
			want: facts.SNP{FirmwareVersion: "1.55", FirmwareBuild: ip(38), RMPReserved: bp(true),
				SNPASIDs: rng(1, 99), SEVASIDs: rng(100, 1006), SEVESASIDs: rng(1, 99), IOMMUSNP: bp(true)},
		},
		{
			name: "milan nvtrust good, old wording",
			log: `[	0.768000] SEV-SNP: RMP table physical address 0x0000000035600000 - 0x0000000075bfffff
[	3.868558] ccp 0000:45:00.1: sev enabled
[	3.918694] ccp 0000:45:00.1: SEV firmware update successful
[	7.315402] ccp 0000:45:00.1: SEV API:1.51 build:3
[	7.315410] ccp 0000:45:00.1: SEV-SNP API:1.51 build:3
[	7.322019] SEV supported: 410 ASIDs
[	7.322019] SEV-ES and SEV-SNP supported: 99 ASIDs`,
			want: facts.SNP{FirmwareVersion: "1.51", FirmwareBuild: ip(3), RMPReserved: bp(true),
				SNPASIDs: rng(1, 99), SEVESASIDs: rng(1, 99), SEVASIDs: rng(100, 509)},
		},
		{
			name: "milan nvtrust firmware too old",
			log: `[	0.564845] SEV-SNP: RMP table physical address 0x0000000088900000 - 0x00000000a8efffff
[	3.257600] ccp 0000:45:00.1: sev enabled
[	3.274785] ccp 0000:45:00.1: SEV-SNP support requires firmware version >= 1:51
[	3.284535] ccp 0000:45:00.1: SEV: failed to INIT error 0x1, rc -5
[	3.284541] ccp 0000:45:00.1: SEV API:1.49 build:3
[	3.424129] SEV supported: 410 ASIDs
[	3.424130] SEV-ES and SEV-SNP supported: 99 ASIDs`,
			want: facts.SNP{FirmwareVersion: "1.49", FirmwareBuild: ip(3), FirmwareTooOld: true,
				FirmwareInitError: "SEV: failed to INIT error 0x1, rc -5", RMPReserved: bp(true),
				SNPASIDs: rng(1, 99), SEVESASIDs: rng(1, 99), SEVASIDs: rng(100, 509)},
		},
		{
			name: "AMDSEV#84 all ASIDs to SEV",
			log: `[    1.316467] SEV-SNP: RMP table physical address 0x0000007ffe500000 - 0x000000807edfffff
[    6.620091] ccp 0000:46:00.1: sev enabled
[    6.663538] ccp 0000:46:00.1: SEV firmware update successful
[   15.503335] ccp 0000:46:00.1: SEV-SNP API:1.51 build:3
[   15.509813] SEV supported: 509 ASIDs`,
			// Without an SEV-ES line the start of the SEV range is unknown.
			want: facts.SNP{FirmwareVersion: "1.51", FirmwareBuild: ip(3), RMPReserved: bp(true)},
		},
		{
			name: "AMDSEV#137 two PSPs",
			log: `[    1.343383] SEV-SNP: RMP table physical address 0x0000000015e00000 - 0x00000000566fffff
[    7.800454] ccp 0000:26:00.1: no command queues available
[    7.800527] ccp 0000:26:00.1: sev enabled
[    7.800529] ccp 0000:26:00.1: psp enabled
[    7.800793] ccp 0000:a2:00.1: no command queues available
[    7.800813] ccp 0000:a2:00.1: psp enabled
[   11.925149] ccp 0000:26:00.1: SEV API:1.52 build:4
[   11.925159] ccp 0000:26:00.1: SEV-SNP API:1.52 build:4
[   12.005457] SEV supported: 509 ASIDs`,
			want: facts.SNP{FirmwareVersion: "1.52", FirmwareBuild: ip(4), RMPReserved: bp(true)},
		},
		{
			name: "AMDSEV#68 RMP not reserved",
			log:  `SEV-SNP: Memory for the RMP table has not been reserved by BIOS`,
			want: facts.SNP{RMPReserved: bp(false)},
		},
		{
			name: "AMDSEV#197 RMP not reserved, firmware updated",
			log: `[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz-6.6.0-rc1+ root=UUID=1d6037c2 ro mem_encrypt=on kvm_amd.sev=1 kvm_amd.sev_snp=1 kvm.sev_es=1 sev=debug
[    0.642786] SEV-SNP: Memory for the RMP table has not been reserved by BIOS
[   11.589402] ccp 0000:42:00.1: enabling device (0140 -> 0142)
[   11.612210] ccp 0000:42:00.1: no command queues available
[   11.781190] ccp 0000:42:00.1: sev enabled
[   11.781208] ccp 0000:42:00.1: psp enabled
[   11.835228] ccp 0000:42:00.1: SEV firmware update successful`,
			want: facts.SNP{RMPReserved: bp(false)},
		},
		{
			name: "AMDSEV#115 no SEV-ES or SNP lines",
			log: `[  108.484914] ccp 0000:42:00.1: sev enabled
[  108.535356] ccp 0000:42:00.1: SEV firmware update successful
[  108.567411] ccp 0000:42:00.1: SEV API:1.51 build:3
[  108.567417] ccp 0000:42:00.1: SEV API:1.51 build:3
[  108.677441] SEV supported: 509 ASIDs`,
			want: facts.SNP{FirmwareVersion: "1.51", FirmwareBuild: ip(3)},
		},
		{
			name: "gate fixture GOOD_LOG",
			log: `ccp 0000:44:00.1: SEV-SNP API:1.55 build:24
SEV-SNP: RMP table physical range [0x0000000100000000 - 0x0000000101000000]
kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)`,
			want: facts.SNP{FirmwareVersion: "1.55", FirmwareBuild: ip(24), RMPReserved: bp(true), SNPASIDs: rng(1, 99)},
		},
		{
			name: "gate fixture INIT_FAILED",
			log:  `ccp 0000:44:00.1: SEV: INIT failed 0x13, rc -5`,
			want: facts.SNP{FirmwareInitError: "SEV: INIT failed 0x13, rc -5"},
		},
		{
			name: "old AMDSEV README int style",
			log: `SEV-SNP API:1.22 build:22
SEV supported: 410 ASIDs
SEV-ES supported: 99 ASIDs
SEV-SNP supported: 99 ASIDs`,
			want: facts.SNP{FirmwareVersion: "1.22", FirmwareBuild: ip(22),
				SNPASIDs: rng(1, 99), SEVESASIDs: rng(1, 99), SEVASIDs: rng(100, 509)},
		},
		{
			name: "talos genoa, no timestamps",
			log: `SEV-SNP: RMP table physical range [0x... - 0x...]
AMD-Vi: IOMMU SNP support enabled
ccp: sev enabled, psp enabled
SEV-SNP API:1.55 build:61
kvm_amd: SEV enabled (ASIDs 1006 - 1006)
kvm_amd: SEV-ES enabled (ASIDs 1 - 1005)
kvm_amd: SEV-SNP enabled (ASIDs 1 - 1005)`,
			want: facts.SNP{FirmwareVersion: "1.55", FirmwareBuild: ip(61), RMPReserved: bp(true), IOMMUSNP: bp(true),
				SEVASIDs: rng(1006, 1006), SEVESASIDs: rng(1, 1005), SNPASIDs: rng(1, 1005)},
		},
		{
			name: "upstream disabled lines give no range",
			log: `kvm_amd: SEV enabled (ASIDs 1 - 509)
kvm_amd: SEV-ES disabled (ASIDs 0 - 0)
kvm_amd: SEV-SNP disabled (ASIDs 0 - 0)
AMD-Vi: SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be supported.`,
			want: facts.SNP{SEVASIDs: rng(1, 509), IOMMUSNP: bp(false)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got facts.SNP
			parseSNPLog(filterBootLog(tt.log), &got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %s\nwant %s", jsonString(t, got), jsonString(t, tt.want))
			}
		})
	}
}

// Boot logs from intel_tdx_dmesg_variants.txt.
func TestParseTDXLog(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want facts.TDX
	}{
		{
			name: "canonical README success",
			log: `[    5.205693] virt/tdx: BIOS enabled: private KeyID range [64, 128)
[   29.884504] virt/tdx: 1050644 KB allocated for PAMT
[   29.884513] virt/tdx: module initialized`,
			want: facts.TDX{BIOSKeyIDs: rng(64, 127), ModuleInitialized: bp(true)},
		},
		{
			name: "canonical README old module",
			log: `virt/tdx: TDX module: attributes 0x0, vendor_id 0x8086, major_version 1, minor_version 5, build_date 20240129, build_num 698
virt/tdx: module initialization failed (-5)`,
			want: facts.TDX{ModuleVersion: "1.5", ModuleBuildNum: ip(698), ModuleBuildDate: "20240129",
				ModuleInitialized: bp(false), ModuleError: "module initialization failed (-5)"},
		},
		{
			name: "format a, HPE",
			log: `[    1.417511] virt/tdx: BIOS enabled: private KeyID range [32, 64)
[    1.417514] virt/tdx: Disable ACPI S3. Turn off TDX in the BIOS to use ACPI S3.
[    9.049065] virt/tdx: TDX module: attributes 0x0, vendor_id 0x8086, major_version 1, minor_version 5, build_date 20240725, build_num 784
[    9.049071] virt/tdx: CMR: [0x100000, 0x77800000)
[    9.049074] virt/tdx: CMR: [0x100000000, 0x3ffe000000)
[   10.140725] virt/tdx: 1042424 KB allocated for PAMT
[   10.140733] virt/tdx: module initialized
[    1.819837] sgx: EPC section 0x4000c00000-0x407edfefff`,
			want: facts.TDX{BIOSKeyIDs: rng(32, 63), ModuleVersion: "1.5", ModuleBuildNum: ip(784),
				ModuleBuildDate: "20240725", ModuleInitialized: bp(true)},
		},
		{
			name: "SPR success then KVM warning",
			log: `[    1.423525] virt/tdx: BIOS enabled: private KeyID range [64, 128)
[    1.423529] virt/tdx: Disable ACPI S3. Turn off TDX in the BIOS to use ACPI S3.
[    8.366483] virt/tdx: TDX module: attributes 0x0, vendor_id 0x8086, major_version 1, minor_version 5, build_date 20240129, build_num 698
[    9.124363] virt/tdx: module initialized
[76907.945726] TDX requires TDP MMU.  Please enable TDP MMU for TDX.`,
			want: facts.TDX{BIOSKeyIDs: rng(64, 127), ModuleVersion: "1.5", ModuleBuildNum: ip(698),
				ModuleBuildDate: "20240129", ModuleInitialized: bp(true)},
		},
		{
			name: "module not loaded",
			log: `virt/tdx: BIOS enabled: private KeyID range [1, 64)
virt/tdx: Disable ACPI S3.
virt/tdx: module not loaded`,
			want: facts.TDX{BIOSKeyIDs: rng(1, 63), ModuleInitialized: bp(false), ModuleError: "module not loaded"},
		},
		{
			// PAMT allocation failed (-ENOMEM): the error is kept with
			// its errno, which tdx.module turns into the PAMT diagnosis.
			name: "module init ENOMEM",
			log: `[    8.185161] virt/tdx: BIOS enabled: private KeyID range [32, 64)
[   21.678799] virt/tdx: TDX module 1.5.06.00, build number 744, build date 0134d817
[   22.904117] virt/tdx: module initialization failed (-12)`,
			want: facts.TDX{BIOSKeyIDs: rng(32, 63), ModuleVersion: "1.5.06.00", ModuleBuildNum: ip(744), ModuleBuildDate: "0134d817",
				ModuleInitialized: bp(false), ModuleError: "module initialization failed (-12)"},
		},
		{
			// KVM's own TDX refusal is no host-module line: the module
			// was never tried, so ModuleInitialized stays unknown.
			name: "kvm refuses tdx without enable_virt_at_load",
			log: `[    8.185161] virt/tdx: BIOS enabled: private KeyID range [32, 64)
[   14.402317] kvm_intel: tdx: tdx requires kvm.enable_virt_at_load=1`,
			want: facts.TDX{BIOSKeyIDs: rng(32, 63)},
		},
		{
			name: "old tdx: prefix, not enabled by BIOS",
			log: `[    0.000000] Command line: BOOT_IMAGE=/vmlinuz-6.5.0-1003-intel-opt ro kvm_intel.tdx=1 nomodeset
[    3.833617] tdx: BIOS enabled: private KeyID range [1, 64)
[   15.271035] kvm_intel: no symbol version for __seamcall_saved_ret
[   15.287540] tdx: not enabled by BIOS.`,
			want: facts.TDX{BIOSKeyIDs: rng(1, 63), ModuleInitialized: bp(false), ModuleError: "not enabled by BIOS"},
		},
		{
			name: "downstream kexec line",
			log: `[0.303913] virt/tdx: BIOS enabled: private KeyID range [64, 128)
[0.303916] virt/tdx: Disable Kexec. Turn off TDX in the BIOS to use KEXEC.
[0.303918] virt/tdx: Disable ACPI S3. Turn off TDX in the BIOS to use ACPI S3.
[17.723174] virt/tdx: 1575964 KB allocated for PAMT
[17.723185] virt/tdx: module initialized`,
			want: facts.TDX{BIOSKeyIDs: rng(64, 127), ModuleInitialized: bp(true)},
		},
		{
			name: "format b",
			log: `[ 10.162072] virt/tdx: BIOS enabled: private KeyID range [64, 128)
[ 10.162074] virt/tdx: Disable ACPI S3. Turn off TDX in the BIOS to use ACPI S3.
[ 21.678799] virt/tdx: TDX module 1.5.06.00, build number 744, build date 0134d817
[ 26.540654] virt/tdx: 8405028 KB allocated for PAMT
[ 26.540658] virt/tdx: module initialized`,
			want: facts.TDX{BIOSKeyIDs: rng(64, 127), ModuleVersion: "1.5.06.00", ModuleBuildNum: ip(744),
				ModuleBuildDate: "0134d817", ModuleInitialized: bp(true)},
		},
		{
			name: "cmdline typo: KeyIDs but no module line",
			log: `[    0.310752] virt/tdx: BIOS enabled: private KeyID range [32, 64)
[    0.310755] virt/tdx: Disable ACPI S3. Turn off TDX in the BIOS to use ACPI S3.`,
			want: facts.TDX{BIOSKeyIDs: rng(32, 63)},
		},
		{
			name: "hibernation",
			log:  `virt/tdx: initialization failed: Hibernation support is enabled`,
			want: facts.TDX{ModuleInitialized: bp(false), ModuleError: "Hibernation support is enabled"},
		},
		{
			name: "TD guest lines say nothing about the host",
			log: `[    0.000000] tdx: Guest detected
[    0.506246] process: using TDX aware idle routine
[    0.598454] Memory Encryption Features active: Intel TDX`,
			want: facts.TDX{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got facts.TDX
			parseTDXLog(filterBootLog(tt.log), &got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %s\nwant %s", jsonString(t, got), jsonString(t, tt.want))
			}
		})
	}
}

// writeTree creates files (content) and symlinks ("->target") under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if len(content) > 2 && content[:2] == "->" {
			if err := os.Symlink(content[2:], full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func openTree(t *testing.T, files map[string]string) *session {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &session{root: root}
}

func unknownMap(s *session) map[string]string {
	m := map[string]string{}
	for _, u := range s.unknown {
		m[u.Field] = u.Reason
	}
	return m
}

func TestTEESubsystem(t *testing.T) {
	t.Run("genoa host with boot log", func(t *testing.T) {
		s := openTree(t, map[string]string{
			"sys/module/kvm_amd/parameters/sev":     "Y\n",
			"sys/module/kvm_amd/parameters/sev_es":  "1\n",
			"sys/module/kvm_amd/parameters/sev_snp": "N\n",
			"dmesg": "[ 13.721003] ccp 0000:01:00.5: SEV-SNP API:1.55 build:38\n" +
				"[ 13.734555] kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)\n",
		})
		var f facts.Facts
		runTEE(context.Background(), s, &f)
		snp := f.TEE.SNP
		if *snp.KVMSEV != true || *snp.KVMSEVES != true || *snp.KVMSEVSNP != false {
			t.Errorf("kvm_amd params: %s", jsonString(t, snp))
		}
		if snp.FirmwareVersion != "1.55" || !reflect.DeepEqual(snp.SNPASIDs, rng(1, 99)) {
			t.Errorf("boot log facts: %s", jsonString(t, snp))
		}
		u := unknownMap(s)
		want := map[string]string{
			"tee.tdx.kvmTdx": "missing: kvm_intel not loaded",
			"tee.sgx.kvmSgx": "missing: kvm_intel not loaded",
			// kvm_amd is there, /dev/sev is not: the TCB cannot be read.
			"tee.snp.tcb": "missing: no /dev/sev (ccp module not loaded, or SEV off in BIOS)",
		}
		if !reflect.DeepEqual(u, want) {
			t.Errorf("unknown = %v, want %v", u, want)
		}
	})
	t.Run("intel host without boot log, bad param", func(t *testing.T) {
		s := openTree(t, map[string]string{
			"sys/module/kvm_intel/parameters/tdx":    "maybe\n",
			"dev/sgx_enclave":                        "",
			"dev/sgx_provision":                      "",
			"sys/firmware/tdx/tdx_module/status":     "initialized\n",
			"sys/firmware/tdx/tdx_module/build_num":  "784\n",
			"sys/firmware/tdx/tdx_module/attributes": "0x0\n",
		})
		var f facts.Facts
		runTEE(context.Background(), s, &f)
		tdx, sgx := f.TEE.TDX, f.TEE.SGX
		if tdx.KVMTDX != nil || !sgx.Enclave || !sgx.Provision || sgx.KVMSGX != nil {
			t.Errorf("tdx %s sgx %s", jsonString(t, tdx), jsonString(t, sgx))
		}
		if tdx.Sysfs["status"] != "initialized" || tdx.Sysfs["build_num"] != "784" {
			t.Errorf("sysfs = %v", tdx.Sysfs)
		}
		u := unknownMap(s)
		for field, reason := range map[string]string{
			"tee.tdx.kvmTdx":          "unparseable: sys/module/kvm_intel/parameters/tdx:1: expected Y, N, 1 or 0, got \"maybe\"",
			"tee.sgx.kvmSgx":          "missing: sys/module/kvm_intel/parameters/sgx",
			"tee.snp.kvmSevSnp":       "missing: kvm_amd not loaded",
			"tee.snp.firmwareVersion": "missing: no boot log (see kernel.bootLog)",
			"tee.tdx.biosKeyIds":      "missing: no boot log (see kernel.bootLog)",
		} {
			if u[field] != reason {
				t.Errorf("unknown[%s] = %q, want %q", field, u[field], reason)
			}
		}
		if _, ok := u["tee.tdx.sysfs"]; ok {
			t.Errorf("tee.tdx.sysfs recorded as unknown although present")
		}
	})
}

// FuzzTEELineCandidates: the checks parseSNPLog and parseTDXLog make before
// their expressions must never pass over a line an expression matches.
func FuzzTEELineCandidates(f *testing.F) {
	for _, l := range []string{
		"ccp 0000:01:00.5: SEV-SNP API:1.55 build:38",
		"SEV-ES and SEV-SNP supported: 99 ASIDs",
		"Sev: failed to INIT rc -5",
		"\u017fEV-SNP: INIT failed",
		"AMD-Vi: IOMMU SNP support enabled",
		"Memory for the RMP table has not been reserved by BIOS",
		"virt/tdx: module initialized",
		"tdx: BIOS enabled: private KeyID range [64, 128)",
		"kvm: disabled by bios",
	} {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, l string) {
		for _, re := range snpExprs {
			if re.MatchString(l) && !snpCandidate(l) {
				t.Fatalf("%s matches %q, which snpCandidate passes over", re.Get(), l)
			}
		}
		if tdxLineRe.MatchString(l) && !strings.HasPrefix(l, "tdx: ") && !strings.HasPrefix(l, "virt/tdx: ") {
			t.Fatalf("tdxLineRe matches %q without either prefix", l)
		}
	})
}
