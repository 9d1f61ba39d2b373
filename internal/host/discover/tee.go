package discover

import (
	"context"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/lazyre"
)

// runTEE fills Facts.TEE (SEV-SNP, TDX, SGX).
//
// Unknown policy, the same for every TEE fact:
//   - A module parameter (kvm_amd sev/sev_es/sev_snp, kvm_intel tdx/sgx)
//     is nil and unknown "missing: <module> not loaded" when the module is
//     absent (it may still be loadable), and unknown with the read or
//     parse error when the module is there but the parameter is not (an
//     older kernel, or a kernel built without that feature).
//   - Boot-log facts are nil with unknown "missing: no boot log" when no
//     boot log could be read. When the log was read but says nothing on a
//     matter, the fact is nil without an unknown entry: silence in the log
//     is itself what a check reasons about (e.g. no KeyID line = TDX off
//     in BIOS), and recording it would flood Unknown on every host.
//   - Vendor-only sysfs (sys/firmware/tdx) is read when present; its
//     absence is normal and not recorded.
//
// Discovery records whatever is there, on any CPU vendor.
func runTEE(_ context.Context, s *session, f *facts.Facts) {
	snp, tdx, sgx := &f.TEE.SNP, &f.TEE.TDX, &f.TEE.SGX

	snp.KVMSEV = s.moduleBool("kvm_amd", "sev", "tee.snp.kvmSev")
	snp.KVMSEVES = s.moduleBool("kvm_amd", "sev_es", "tee.snp.kvmSevEs")
	snp.KVMSEVSNP = s.moduleBool("kvm_amd", "sev_snp", "tee.snp.kvmSevSnp")
	tdx.KVMTDX = s.moduleBool("kvm_intel", "tdx", "tee.tdx.kvmTdx")
	sgx.KVMSGX = s.moduleBool("kvm_intel", "sgx", "tee.sgx.kvmSgx")

	sgx.Enclave = s.exists("dev/sgx_enclave") || s.exists("dev/sgx/enclave")
	sgx.Provision = s.exists("dev/sgx_provision") || s.exists("dev/sgx/provision")

	tdx.Sysfs = s.tdxSysfs()
	snp.TCB = s.snpTCB(snp)

	lines, _, ok := s.bootLines()
	if !ok {
		const reason = facts.ReasonMissing + ": no boot log (see kernel.bootLog)"
		for _, fld := range []string{
			"tee.snp.firmwareVersion", "tee.snp.rmpReserved", "tee.snp.snpAsids",
			"tee.snp.sevAsids", "tee.snp.sevEsAsids", "tee.snp.iommuSnp",
			"tee.tdx.biosKeyIds", "tee.tdx.moduleInitialized", "tee.tdx.moduleVersion",
		} {
			s.unknownf(fld, reason)
		}
		return
	}
	parseSNPLog(lines, snp)
	parseTDXLog(lines, tdx)
}

// moduleBool reads a Y/N module parameter; see runTEE for the policy.
func (s *session) moduleBool(module, param, field string) *bool {
	if !s.exists("sys/module/" + module) {
		s.unknownf(field, "%s: %s not loaded", facts.ReasonMissing, module)
		return nil
	}
	p := "sys/module/" + module + "/parameters/" + param
	v, ok := s.readString(field, p)
	if !ok {
		return nil
	}
	b, ok := ParamBool(v)
	if !ok {
		s.unknownf(field, "%s", unparseable(p, 1, "expected Y, N, 1 or 0, got "+strconv.Quote(v)))
		return nil
	}
	return &b
}

// tdxSysfs reads sys/firmware/tdx/tdx_module/* on vendor kernels that have
// it, capped so that an odd tree cannot bloat Facts.
func (s *session) tdxSysfs() map[string]string {
	const dir = "sys/firmware/tdx/tdx_module"
	ents, err := s.root.FS().ReadDir(dir)
	if err != nil {
		if s.exists("sys/firmware/tdx") {
			s.unknownf("tee.tdx.sysfs", "%s", ReadReason(dir, err))
		}
		return nil
	}
	out := map[string]string{}
	for _, e := range ents {
		if !e.Type().IsRegular() || len(out) == 32 {
			continue
		}
		if v, ok := s.readString("", dir+"/"+e.Name()); ok {
			if len(v) > 256 {
				v = v[:256]
			}
			out[e.Name()] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

var (
	snpAPIRe      = lazyre.New(`\bSEV-SNP API:(\d+)\.(\d+) build:(\d+)`)
	sevAPIRe      = lazyre.New(`\bSEV API:(\d+)\.(\d+) build:(\d+)`)
	snpTooOldRe   = lazyre.New(`SEV-SNP support requires firmware version >=`)
	rmpOKRe       = lazyre.New(`RMP table physical (?:range|address)`)
	rmpMissingRe  = lazyre.New(`Memory for the RMP table has not been reserved by BIOS`)
	asidRangeRe   = lazyre.New(`\bSEV(-ES|-SNP)? (enabled|disabled|unusable) \(ASIDs (\d+) - (\d+)\)`)
	asidCountRe   = lazyre.New(`\bSEV(-ES and SEV-SNP|-ES|-SNP)? supported: (\d+) ASIDs`)
	sevInitFailRe = lazyre.New(`(?i)\bSEV(?:-SNP)?:? .*(?:INIT failed|failed to INIT).*`)
	iommuSNPOKRe  = lazyre.New(`AMD-Vi: IOMMU SNP support enabled`)
	iommuSNPBadRe = lazyre.New(`AMD-Vi: .*SNP.*(?:cannot be supported|not supported|IOMMU (?:is )?disabled or configured in passthrough)`)
)

// snpExprs are the expressions parseSNPLog tries, for the test that
// holds snpCandidate to them.
var snpExprs = []*lazyre.Regexp{snpAPIRe, sevAPIRe, snpTooOldRe, rmpOKRe, rmpMissingRe, asidRangeRe, asidCountRe, sevInitFailRe, iommuSNPOKRe, iommuSNPBadRe}

// snpCandidate reports whether one of snpExprs may match l: each needs
// "SEV", "RMP table" or "AMD-Vi: ", and sevInitFailRe "sev" in any case.
// The other boot-log lines (all of them on a host without SEV) are passed
// without compiling and running ten expressions. A line with a byte
// outside ASCII is always a candidate: (?i) folds 's' with U+017F too.
func snpCandidate(l string) bool {
	for i := 0; i < len(l); i++ {
		if l[i] >= 0x80 {
			return true
		}
	}
	return containsFoldASCII(l, "sev") || strings.Contains(l, "RMP table") || strings.Contains(l, "AMD-Vi: ")
}

// containsFoldASCII reports whether s contains lower, a lower-case ASCII
// word, with ASCII case ignored.
func containsFoldASCII(s, lower string) bool {
	for i := 0; i+len(lower) <= len(s); i++ {
		j := 0
		for j < len(lower) && lowerASCII(s[i+j]) == lower[j] {
			j++
		}
		if j == len(lower) {
			return true
		}
	}
	return false
}

// parseSNPLog reads the SEV-SNP facts from boot-log lines (timestamps
// already removed). Later lines win (a firmware update during boot prints
// the new version last). Ranges are recorded only for "enabled" kernels'
// lines; old out-of-tree kernels print counts ("SEV-ES and SEV-SNP
// supported: 99 ASIDs"), from which the ranges follow: SEV-ES and SNP
// guests use ASIDs 1..N, plain SEV the ones above.
func parseSNPLog(lines []string, snp *facts.SNP) {
	var sevVer string
	var sevBuild *int
	sevCount, esCount, snpCount := 0, 0, 0
	for _, l := range lines {
		if !snpCandidate(l) {
			continue
		}
		switch {
		case snpAPIRe.MatchString(l):
			m := snpAPIRe.FindStringSubmatch(l)
			snp.FirmwareVersion = m[1] + "." + m[2]
			snp.FirmwareBuild = atoiPtr(m[3])
		case sevAPIRe.MatchString(l):
			m := sevAPIRe.FindStringSubmatch(l)
			sevVer, sevBuild = m[1]+"."+m[2], atoiPtr(m[3])
		case snpTooOldRe.MatchString(l):
			snp.FirmwareTooOld = true
		case rmpMissingRe.MatchString(l):
			snp.RMPReserved = boolPtr(false)
		case rmpOKRe.MatchString(l):
			snp.RMPReserved = boolPtr(true)
		case asidRangeRe.MatchString(l):
			m := asidRangeRe.FindStringSubmatch(l)
			var r *facts.Range
			if m[2] == "enabled" {
				r = &facts.Range{Min: atoi(m[3]), Max: atoi(m[4])}
			}
			switch m[1] {
			case "":
				snp.SEVASIDs = r
			case "-ES":
				snp.SEVESASIDs = r
			case "-SNP":
				snp.SNPASIDs = r
			}
		case asidCountRe.MatchString(l):
			m := asidCountRe.FindStringSubmatch(l)
			n := atoi(m[2])
			switch m[1] {
			case "":
				sevCount = n
			case "-ES":
				esCount = n
			case "-SNP":
				snpCount = n
			case "-ES and SEV-SNP":
				esCount, snpCount = n, n
			}
		case sevInitFailRe.MatchString(l):
			snp.FirmwareInitError = sevInitFailRe.FindString(l)
		case iommuSNPOKRe.MatchString(l):
			snp.IOMMUSNP = boolPtr(true)
		case iommuSNPBadRe.MatchString(l):
			snp.IOMMUSNP = boolPtr(false)
		}
	}
	// The SNP API line appears only once SNP initialised; with too old a
	// firmware only the SEV line tells the version.
	if snp.FirmwareVersion == "" && sevVer != "" {
		snp.FirmwareVersion, snp.FirmwareBuild = sevVer, sevBuild
	}
	if esCount > 0 && snp.SEVESASIDs == nil {
		snp.SEVESASIDs = &facts.Range{Min: 1, Max: esCount}
		if sevCount > 0 && snp.SEVASIDs == nil {
			snp.SEVASIDs = &facts.Range{Min: esCount + 1, Max: esCount + sevCount}
		}
	}
	if snpCount > 0 && snp.SNPASIDs == nil {
		snp.SNPASIDs = &facts.Range{Min: 1, Max: snpCount}
	}
}

var (
	tdxLineRe     = lazyre.New(`^(?:virt/)?tdx: (.*)$`)
	tdxKeyIDRe    = lazyre.New(`^BIOS enabled: private KeyID range \[(\d+), (\d+)\)`)
	tdxInitOKRe   = lazyre.New(`(?i)^(?:TDX[- ])?module initialized`)
	tdxVerARe     = lazyre.New(`^TDX module: attributes 0x[0-9a-fA-F]+, vendor_id 0x[0-9a-fA-F]+, major_version (\d+), minor_version (\d+), build_date (\d+), build_num (\d+)`)
	tdxVerBRe     = lazyre.New(`^TDX module (\d+(?:\.\d+)+), build number (\d+), build date ([0-9a-zA-Z]+)`)
	tdxFailRe     = lazyre.New(`(?i)(failed|not loaded|not enabled)`)
	tdxHibernateP = "initialization failed: "
)

// parseTDXLog reads the TDX host facts from boot-log lines. The kernel
// initialises the module once, so a success line wins over any failure
// line; among failures the last one is kept. KeyID ranges are printed
// half-open ("[64, 128)") and stored inclusive (64-127). Lines of a TD
// guest ("tdx: Guest detected") say nothing about the host and are ignored.
func parseTDXLog(lines []string, tdx *facts.TDX) {
	initOK := false
	for _, l := range lines {
		// tdxLineRe's prefixes, compared before the expressions are
		// compiled: most hosts' logs have no such line.
		if !strings.HasPrefix(l, "tdx: ") && !strings.HasPrefix(l, "virt/tdx: ") {
			continue
		}
		m := tdxLineRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		msg := strings.TrimSpace(m[1])
		switch {
		case tdxKeyIDRe.MatchString(msg):
			k := tdxKeyIDRe.FindStringSubmatch(msg)
			lo, hi := atoi(k[1]), atoi(k[2])
			if hi > lo {
				tdx.BIOSKeyIDs = &facts.Range{Min: lo, Max: hi - 1}
			}
		case tdxInitOKRe.MatchString(msg):
			initOK = true
			tdx.ModuleInitialized = boolPtr(true)
			tdx.ModuleError = ""
		case tdxVerARe.MatchString(msg):
			v := tdxVerARe.FindStringSubmatch(msg)
			tdx.ModuleVersion = v[1] + "." + v[2]
			tdx.ModuleBuildDate = v[3]
			tdx.ModuleBuildNum = atoiPtr(v[4])
		case tdxVerBRe.MatchString(msg):
			v := tdxVerBRe.FindStringSubmatch(msg)
			tdx.ModuleVersion = v[1]
			tdx.ModuleBuildNum = atoiPtr(v[2])
			tdx.ModuleBuildDate = v[3]
		case strings.HasPrefix(msg, "Disable "):
			// "Disable ACPI S3. Turn off TDX in the BIOS to use ACPI S3."
		case tdxFailRe.MatchString(msg) && !initOK:
			tdx.ModuleInitialized = boolPtr(false)
			tdx.ModuleError = strings.TrimSuffix(strings.TrimPrefix(msg, tdxHibernateP), ".")
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0 // callers pass regexp-matched digits; only overflow lands here
	}
	return n
}

func atoiPtr(s string) *int {
	n := atoi(s)
	return &n
}

func boolPtr(b bool) *bool { return &b }
