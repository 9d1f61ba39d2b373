package discover

import (
	"strings"
	"testing"
)

const cpuinfoGenoa = `processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC 9654 96-Core Processor
stepping	: 1
flags		: fpu vme de svm sme sev sev_es sev_snp x2apic npt nrip_save
processor	: 1
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC 9654 96-Core Processor
stepping	: 1
flags		: fpu vme de svm sme sev sev_es sev_snp x2apic npt nrip_save
`

func TestParseCPUInfo(t *testing.T) {
	ci, err := parseCPUInfo([]byte(cpuinfoGenoa))
	if err != nil {
		t.Fatal(err)
	}
	if ci.logical != 2 || ci.vendorID != "AuthenticAMD" || *ci.family != 25 || *ci.model != 17 || *ci.stepping != 1 || ci.arch != "x86_64" {
		t.Errorf("parsed %+v", ci)
	}
	if !ci.flags["sev_snp"] || ci.flags["vmx"] {
		t.Errorf("flags %v", ci.flags)
	}
	for _, bad := range []struct{ in, want string }{
		{"processor : 0\nthis line is garbage\n", "line 2: expected"},
		{"processor : 0\ncpu family : x\n", "line 2: cpu family: expected a number"},
		{"", "empty"},
	} {
		_, err := parseCPUInfo([]byte(bad.in))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("parseCPUInfo(%q) = %v, want %q", bad.in, err, bad.want)
		}
	}
}

func TestProductLine(t *testing.T) {
	tests := []struct {
		vendor   string
		fam, mod int
		name     string
		wantLine string
	}{
		{"amd", 0x17, 0x01, "AMD EPYC 7601 32-Core Processor", "naples"},
		{"amd", 0x17, 0x31, "AMD EPYC 7502 32-Core Processor", "rome"},
		{"amd", 0x19, 0x01, "AMD EPYC 7763 64-Core Processor", "milan"},
		{"amd", 0x19, 0x01, "AMD EPYC", "milan"},
		{"amd", 0x19, 0x11, "AMD EPYC 9654 96-Core Processor", "genoa"},
		{"amd", 0x19, 0xa0, "AMD EPYC 9754 128-Core Processor", "bergamo"},
		{"amd", 0x19, 0xa0, "AMD EPYC 8534P 64-Core Processor", "siena"},
		{"amd", 0x1a, 0x02, "AMD EPYC 9575F 64-Core Processor", "turin"},
		{"amd", 0x1a, 0x11, "AMD EPYC 9965 192-Core Processor", "turin"},
		{"amd", 0x19, 0x21, "AMD Ryzen 9 5950X 16-Core Processor", ""},
		{"amd", 0x19, 0x18, "AMD Ryzen Threadripper PRO 7995WX", ""},
		{"intel", 6, 0x8f, "Intel(R) Xeon(R) Gold 6438Y+", "sapphire-rapids"},
		{"intel", 6, 207, "INTEL(R) XEON(R) PLATINUM 8558", "emerald-rapids"},
		{"intel", 6, 173, "Genuine Intel(R) 0000", "granite-rapids"},
		{"intel", 6, 0xaf, "Intel(R) Xeon(R) 6780E", "sierra-forest"},
		{"intel", 6, 0x6a, "Intel(R) Xeon(R) Platinum 8380", "ice-lake"},
		{"intel", 6, 0x9e, "Intel(R) Core(TM) i7-8700", ""},
	}
	for _, tt := range tests {
		if got := productLine(tt.vendor, &tt.fam, &tt.mod, tt.name); got != tt.wantLine {
			t.Errorf("productLine(%s, %#x, %#x, %q) = %q, want %q", tt.vendor, tt.fam, tt.mod, tt.name, got, tt.wantLine)
		}
	}
}

func TestRunCPUMalformed(t *testing.T) {
	root := coreRoot(t, map[string]string{"proc/cpuinfo": "processor : 0\nbroken\n"})
	f, u := runSub(t, root, runCPU)
	if f.CPU.Vendor != "" {
		t.Errorf("malformed cpuinfo still filled %+v", f.CPU)
	}
	if !strings.Contains(u["cpu"], "proc/cpuinfo:2") {
		t.Errorf("unknown cpu = %q, want file:line", u["cpu"])
	}
	if u["cpu.cpuid"] != "offline root" {
		t.Errorf("cpu.cpuid = %q, want offline root", u["cpu.cpuid"])
	}
}

func FuzzParseCPUInfo(f *testing.F) {
	f.Add([]byte(cpuinfoGenoa))
	f.Fuzz(func(t *testing.T, b []byte) {
		ci, err := parseCPUInfo(b)
		if err == nil && ci.logical == 0 {
			t.Fatal("no error but no processors")
		}
	})
}
