package discover

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// cpuFlagsOfInterest are the cpuinfo flags berth keeps: hardware
// virtualisation, the memory-encryption and TEE flags (which the kernel
// clears when the BIOS disabled the feature), and the guest marker.
var cpuFlagsOfInterest = []string{
	"avic", "ept", "ept_ad", "flexpriority", "hypervisor", "npt", "nrip_save",
	"pdpe1gb", "sev", "sev_es", "sev_snp", "sgx", "sgx_lc", "sme",
	"svm", "tdx_guest", "tdx_host_platform", "tme", "vmx", "vnmi", "vpid", "x2apic",
}

// cpuInfo is what parseCPUInfo extracts from proc/cpuinfo.
type cpuInfo struct {
	arch      string
	vendorID  string
	family    *int
	model     *int
	stepping  *int
	modelName string
	flags     map[string]bool
	logical   int
}

// parseCPUInfo parses proc/cpuinfo. Only the first processor's identity is
// kept (hosts are not mixed); processors are counted. A line that is not
// "key : value", or a non-numeric family/model/stepping, is an error naming
// the line.
func parseCPUInfo(b []byte) (cpuInfo, error) {
	var ci cpuInfo
	seenFlags := false
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return ci, &lineError{line: n + 1, msg: "expected \"key : value\""}
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		num := func(dst **int) error {
			if *dst != nil {
				return nil
			}
			i, err := strconv.Atoi(v)
			if err != nil || i < 0 {
				return &lineError{line: n + 1, msg: fmt.Sprintf("%s: expected a number, got %q", k, v)}
			}
			*dst = &i
			return nil
		}
		var err error
		switch k {
		case "processor":
			ci.logical++
		case "vendor_id":
			if ci.vendorID == "" {
				ci.vendorID = v
			}
		case "cpu family":
			err = num(&ci.family)
		case "model":
			err = num(&ci.model)
		case "stepping":
			if v != "unknown" {
				err = num(&ci.stepping)
			}
		case "model name":
			if ci.modelName == "" {
				ci.modelName = v
			}
		case "flags", "Features":
			if !seenFlags {
				seenFlags = true
				ci.flags = map[string]bool{}
				for _, f := range strings.Fields(v) {
					ci.flags[f] = true
				}
			}
		case "CPU implementer":
			ci.arch = "aarch64"
		}
		if err != nil {
			return ci, err
		}
	}
	switch {
	case ci.arch != "":
	case ci.vendorID == "GenuineIntel" || ci.vendorID == "AuthenticAMD" || ci.vendorID == "HygonGenuine":
		ci.arch = "x86_64"
	case strings.HasPrefix(ci.vendorID, "IBM/S390"):
		ci.arch = "s390x"
	}
	if ci.logical == 0 && (ci.vendorID != "" || ci.flags != nil) {
		return ci, &lineError{msg: "no \"processor\" entries"}
	}
	if ci.logical == 0 {
		return ci, &lineError{msg: "empty"}
	}
	return ci, nil
}

// lineError is a parse failure at a 1-based line (0: the whole file).
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("line %d: %s", e.line, e.msg)
	}
	return e.msg
}

// parseReason turns a parse error of path into an unknown-fact reason
// naming the file and line.
func parseReason(path string, err error) string {
	var le *lineError
	if errors.As(err, &le) {
		return unparseable(path, le.line, le.msg)
	}
	return unparseable(path, 0, err.Error())
}

// procCPUInfo parses proc/cpuinfo once per run; the reason it could not be
// read or parsed is recorded under cpu.
func (s *session) procCPUInfo() (cpuInfo, bool) {
	s.cpuinfoOnce.Do(func() {
		b, ok := s.readFile("cpu", "proc/cpuinfo")
		if !ok {
			return
		}
		ci, err := parseCPUInfo(b)
		if err != nil {
			s.unknownf("cpu", "%s", parseReason("proc/cpuinfo", err))
			return
		}
		s.cpuinfo, s.cpuinfoOK = ci, true
	})
	return s.cpuinfo, s.cpuinfoOK
}

// cpuidView returns the CPUID view: measured on a live root (CPUID
// describes the CPU we run on, which is the host's even when it is mounted
// at /host), recorded on an offline root. The reason it is unknown is
// recorded under cpu.cpuid.
func (s *session) cpuidView() *facts.CPUID {
	s.cpuidOnce.Do(func() {
		if s.root.Live() {
			if !haveCPUID {
				s.unknownf("cpu.cpuid", "%s: no CPUID on %s", facts.ReasonMissing, runtime.GOARCH)
				return
			}
			c := &facts.CPUID{}
			c.HypervisorVendor, c.Features = readCPUID()
			hostfs.RecordProbe(s.root, "cpuid", c)
			s.cpuid = c
			return
		}
		var c facts.CPUID
		if err := s.root.Probe("cpuid", &c); err != nil {
			if errors.Is(err, hostfs.ErrOffline) {
				s.unknownf("cpu.cpuid", "%s", facts.ReasonOffline)
			} else {
				s.unknownf("cpu.cpuid", "%s", err.Error())
			}
			return
		}
		c.Recorded = true
		s.cpuid = &c
	})
	return s.cpuid
}

func runCPU(_ context.Context, s *session, f *facts.Facts) {
	c := &f.CPU
	if ci, ok := s.procCPUInfo(); ok {
		c.Arch = ci.arch
		c.VendorID = ci.vendorID
		c.Vendor = vendorOf(ci.vendorID)
		c.Family, c.Model, c.Stepping = ci.family, ci.model, ci.stepping
		c.ModelName = ci.modelName
		c.LogicalCPUs = ci.logical
		for _, fl := range cpuFlagsOfInterest {
			if ci.flags[fl] {
				c.Flags = append(c.Flags, fl)
			}
		}
		if ci.flags == nil {
			s.unknownf("cpu.flags", "%s", unparseable("proc/cpuinfo", 0, "no flags line"))
		}
		c.ProductLine = productLine(c.Vendor, c.Family, c.Model, c.ModelName)
	}
	if c.Arch == "" || c.Arch == "x86_64" {
		c.CPUID = s.cpuidView()
	}
}

// vendorOf maps the CPUID vendor string to berth's short name.
func vendorOf(id string) string {
	switch id {
	case "GenuineIntel":
		return "intel"
	case "AuthenticAMD":
		return "amd"
	case "":
		return ""
	default:
		return "other"
	}
}

// productLine names the server generation from family and model.
// AMD: family 17h models 00h-0Fh Naples, 30h-3Fh Rome; 19h 00h-0Fh Milan,
// 10h-1Fh Genoa, A0h-AFh Bergamo and Siena (told apart by the EPYC 8004
// name of Siena); 1Ah 00h-1Fh Turin (and Turin dense). Desktop parts share
// some of these models, so an AMD model name must say EPYC when one is
// given. Intel family 6: 8Fh Sapphire Rapids, CFh Emerald Rapids, ADh/AEh
// Granite Rapids, AFh Sierra Forest, DDh Clearwater Forest, 6Ah/6Ch Ice
// Lake SP/D (Linux arch/x86/include/asm/intel-family.h).
func productLine(vendor string, family, model *int, name string) string {
	if family == nil || model == nil {
		return ""
	}
	fam, mod := *family, *model
	switch vendor {
	case "amd":
		if name != "" && !strings.Contains(name, "EPYC") {
			return ""
		}
		switch {
		case fam == 0x17 && mod <= 0x0f:
			return "naples"
		case fam == 0x17 && mod >= 0x30 && mod <= 0x3f:
			return "rome"
		case fam == 0x19 && mod <= 0x0f:
			return "milan"
		case fam == 0x19 && mod >= 0x10 && mod <= 0x1f:
			return "genoa"
		case fam == 0x19 && mod >= 0xa0 && mod <= 0xaf:
			if isSienaName(name) {
				return "siena"
			}
			return "bergamo"
		case fam == 0x1a && mod <= 0x1f:
			return "turin"
		}
	case "intel":
		if fam != 6 {
			return ""
		}
		switch mod {
		case 0x6a, 0x6c:
			return "ice-lake"
		case 0x8f:
			return "sapphire-rapids"
		case 0xcf:
			return "emerald-rapids"
		case 0xad, 0xae:
			return "granite-rapids"
		case 0xaf:
			return "sierra-forest"
		case 0xdd:
			return "clearwater-forest"
		}
	}
	return ""
}

// isSienaName recognises the EPYC 8004 series ("AMD EPYC 8534P 64-Core").
func isSienaName(name string) bool {
	_, rest, ok := strings.Cut(name, "EPYC ")
	return ok && len(rest) >= 4 && rest[0] == '8' && allDigits(rest[1:4])
}
