package refvalues

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// SNPReportSize is the size of an SEV-SNP ATTESTATION_REPORT in every
// version (AMD SEV-SNP Firmware ABI Specification, "ATTESTATION_REPORT
// Structure": 0x4A0 bytes, the signature over bytes 0x0-0x29F).
const SNPReportSize = 0x4a0

// SNPReport holds the fields of an SEV-SNP attestation report that
// reference values concern. Offsets are the ABI specification's; version
// 3 added the CPUID family, model and stepping at 0x188, version 5 the
// launch and current mitigation vectors at 0x1F8 and 0x200. The signature
// is not checked: that needs the VCEK or VLEK and is a verifier's
// business; berth reads the measured fields to say why they differ.
type SNPReport struct {
	Version         uint32    `json:"version"`
	GuestSVN        uint32    `json:"guestSvn"`
	Policy          Hex       `json:"policy"`
	FamilyID        string    `json:"familyId"`
	ImageID         string    `json:"imageId"`
	VMPL            uint32    `json:"vmpl"`
	SignatureAlgo   uint32    `json:"signatureAlgo"`
	CurrentTCB      Hex       `json:"currentTcb"`
	PlatformInfo    Hex       `json:"platformInfo"`
	SigningKey      string    `json:"signingKey"`
	ReportData      string    `json:"reportData"`
	Measurement     Digest384 `json:"measurement"`
	HostData        string    `json:"hostData"`
	IDKeyDigest     Digest384 `json:"idKeyDigest"`
	AuthorKeyDigest Digest384 `json:"authorKeyDigest"`
	ReportedTCB     Hex       `json:"reportedTcb"`
	// CPUID is family, model and stepping of the host (version 3 and
	// later); nil in a version 2 report.
	CPUID        *SNPReportCPUID `json:"cpuid,omitempty"`
	ChipID       string          `json:"chipId"`
	CommittedTCB Hex             `json:"committedTcb"`
	LaunchTCB    Hex             `json:"launchTcb"`
	// LaunchMitVector and CurrentMitVector exist from version 5.
	LaunchMitVector  *Hex `json:"launchMitVector,omitempty"`
	CurrentMitVector *Hex `json:"currentMitVector,omitempty"`

	hostData [32]byte
}

// SNPReportCPUID is the host CPU a version 3+ report names.
type SNPReportCPUID struct {
	Family   uint8 `json:"family"`
	Model    uint8 `json:"model"`
	Stepping uint8 `json:"stepping"`
}

// ProductLine is the EPYC generation of the CPU ("" when not an SNP
// generation berth knows): family 19h models 0-Fh Milan, 10h-1Fh and
// A0h-AFh Genoa (Bergamo, Siena), family 1Ah Turin.
func (c *SNPReportCPUID) ProductLine() ProductLine {
	switch {
	case c == nil:
		return ""
	case c.Family == 0x19 && c.Model < 0x10:
		return Milan
	case c.Family == 0x19 && (c.Model < 0x20 || c.Model >= 0xa0 && c.Model < 0xb0):
		return Genoa
	case c.Family == 0x1a:
		return Turin
	}
	return ""
}

// snpReportErr is a malformed report: the offset and field at fault.
func snpReportErr(off int, field, format string, a ...any) error {
	return &EventLogError{Input: "SNP report", Offset: off, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// Policy bits (ABI specification, "Guest Policy").
const (
	snpPolicySMT        = 1 << 16
	snpPolicyReserved1  = 1 << 17
	snpPolicyMigrateMA  = 1 << 18
	snpPolicyDebug      = 1 << 19
	snpPolicySingleSock = 1 << 20
)

// snpPolicyBits names the policy bits a guest launch sets.
var snpPolicyBits = []struct {
	bit  uint64
	name string
}{
	{snpPolicySMT, "SMT (16)"}, {snpPolicyMigrateMA, "MIGRATE_MA (18)"}, {snpPolicyDebug, "DEBUG (19)"},
	{snpPolicySingleSock, "SINGLE_SOCKET (20)"}, {1 << 21, "CXL_ALLOW (21)"}, {1 << 22, "MEM_AES_256_XTS (22)"},
	{1 << 23, "RAPL_DIS (23)"}, {1 << 24, "CIPHERTEXT_HIDING (24)"}, {1 << 25, "PAGE_SWAP_DISABLE (25)"},
}

// ParseSNPReport reads a raw 1184-byte attestation report of version 2, 3
// or 5, refusing one whose version, reserved fields or enumerations are
// not the specification's (a truncated file, another structure, or a
// report of a later version) with the offset and field.
func ParseSNPReport(b []byte) (*SNPReport, error) {
	if len(b) != SNPReportSize {
		return nil, snpReportErr(0, "length", "%d bytes, an attestation report has %d (0x4a0)", len(b), SNPReportSize)
	}
	le := binary.LittleEndian
	r := &SNPReport{Version: le.Uint32(b)}
	switch r.Version {
	case 2, 3, 5:
	default:
		return nil, snpReportErr(0, "VERSION", "%d, expected 2, 3 or 5", r.Version)
	}
	zero := func(from, to int, field string) error {
		for i := from; i < to; i++ {
			if b[i] != 0 {
				return snpReportErr(i, field, "byte %#x is not zero: not a version %d report (reserved bytes %#x-%#x must be zero)", b[i], r.Version, from, to-1)
			}
		}
		return nil
	}
	r.GuestSVN = le.Uint32(b[0x4:])
	r.Policy = Hex(le.Uint64(b[0x8:]))
	if r.Policy&snpPolicyReserved1 == 0 {
		return nil, snpReportErr(0x8, "POLICY", "%#x lacks bit 17, which is always one", uint64(r.Policy))
	}
	r.FamilyID, r.ImageID = hex.EncodeToString(b[0x10:0x20]), hex.EncodeToString(b[0x20:0x30])
	if r.VMPL = le.Uint32(b[0x30:]); r.VMPL > 3 {
		return nil, snpReportErr(0x30, "VMPL", "%d, expected 0-3", r.VMPL)
	}
	if r.SignatureAlgo = le.Uint32(b[0x34:]); r.SignatureAlgo != 1 {
		return nil, snpReportErr(0x34, "SIGNATURE_ALGO", "%d, expected 1 (ECDSA P-384 with SHA-384)", r.SignatureAlgo)
	}
	r.CurrentTCB, r.PlatformInfo = Hex(le.Uint64(b[0x38:])), Hex(le.Uint64(b[0x40:]))
	keyInfo := le.Uint32(b[0x48:])
	switch k := keyInfo >> 2 & 7; k {
	case 0:
		r.SigningKey = "VCEK"
	case 1:
		r.SigningKey = "VLEK"
	case 7:
		r.SigningKey = "none"
	default:
		return nil, snpReportErr(0x48, "SIGNING_KEY", "%d, expected 0 (VCEK), 1 (VLEK) or 7 (none)", k)
	}
	if keyInfo>>5 != 0 {
		return nil, snpReportErr(0x48, "key information", "%#x sets reserved bits 31:5", keyInfo)
	}
	if err := zero(0x4c, 0x50, "reserved"); err != nil {
		return nil, err
	}
	r.ReportData = hex.EncodeToString(b[0x50:0x90])
	copy(r.Measurement[:], b[0x90:0xc0])
	copy(r.hostData[:], b[0xc0:0xe0])
	r.HostData = hex.EncodeToString(r.hostData[:])
	copy(r.IDKeyDigest[:], b[0xe0:0x110])
	copy(r.AuthorKeyDigest[:], b[0x110:0x140])
	r.ReportedTCB = Hex(le.Uint64(b[0x180:]))
	cpuidEnd := 0x188
	if r.Version >= 3 {
		r.CPUID = &SNPReportCPUID{Family: b[0x188], Model: b[0x189], Stepping: b[0x18a]}
		cpuidEnd = 0x18b
	}
	if err := zero(cpuidEnd, 0x1a0, "reserved"); err != nil {
		return nil, err
	}
	r.ChipID = hex.EncodeToString(b[0x1a0:0x1e0])
	r.CommittedTCB = Hex(le.Uint64(b[0x1e0:]))
	if err := zero(0x1eb, 0x1ec, "reserved"); err != nil {
		return nil, err
	}
	if err := zero(0x1ef, 0x1f0, "reserved"); err != nil {
		return nil, err
	}
	r.LaunchTCB = Hex(le.Uint64(b[0x1f0:]))
	reservedFrom := 0x1f8
	if r.Version >= 5 {
		l, c := Hex(le.Uint64(b[0x1f8:])), Hex(le.Uint64(b[0x200:]))
		r.LaunchMitVector, r.CurrentMitVector = &l, &c
		reservedFrom = 0x208
	}
	if err := zero(reservedFrom, 0x2a0, "reserved"); err != nil {
		return nil, err
	}
	// The signature: R and S, 72 bytes each, little endian, of which a
	// P-384 value uses 48; the rest of the 512 bytes is reserved.
	const sig = 0x2a0
	if err := zero(sig+48, sig+72, "SIGNATURE.R"); err != nil {
		return nil, err
	}
	if err := zero(sig+72+48, sig+144, "SIGNATURE.S"); err != nil {
		return nil, err
	}
	if err := zero(sig+144, SNPReportSize, "SIGNATURE reserved"); err != nil {
		return nil, err
	}
	return r, nil
}

// DecodeSNPReport reads a report as the guest tools write it: the raw
// 1184 bytes (snpguest, go-sev-guest), or the same in hex (2368 digits,
// spaces and newlines allowed).
func DecodeSNPReport(b []byte) (*SNPReport, error) {
	if len(b) != SNPReportSize {
		if t := strings.Join(strings.Fields(string(b)), ""); len(t) == 2*SNPReportSize {
			if raw, err := hex.DecodeString(t); err == nil {
				return ParseSNPReport(raw)
			}
		}
	}
	return ParseSNPReport(b)
}

// UnmarshalText reads the "0x..." MarshalText writes.
func (h *Hex) UnmarshalText(b []byte) error {
	v, err := ParseHex(string(b))
	if err != nil {
		return err
	}
	*h = Hex(v)
	return nil
}

// ReferenceSNP reads the SNP values of a berth refvalues document (-o json
// or -o yaml, schema SchemaVersion).
func ReferenceSNP(name string, b []byte) (*Document, error) {
	var doc Document
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: not a berth refvalues document (-o json or -o yaml): %w", name, err)
	}
	if doc.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%s: schemaVersion %q, expected %q (berth refvalues -o json; RVPS and Contrast exports are not read)", name, doc.SchemaVersion, SchemaVersion)
	}
	if doc.SNP == nil || len(doc.SNP.Sets) == 0 {
		return nil, fmt.Errorf("%s: no snp.sets: compute it with berth refvalues --platform <snp platform> ... -o json", name)
	}
	return &doc, nil
}

// SNPExplanation compares an attestation report with berth's reference
// values, field by field, in the order a verifier checks them.
type SNPExplanation struct {
	Report *SNPReport `json:"report"`
	Checks []SNPCheck `json:"checks"`
	// First is the first field that differs.
	First *SNPCheck `json:"firstMismatch,omitempty"`
}

// SNPCheck is one compared field.
type SNPCheck struct {
	Field    string `json:"field"`
	Offset   int    `json:"offset"`
	Report   string `json:"report"`
	Expected string `json:"expected"`
	Match    bool   `json:"match"`
	// Note says which expected value matched (product line, vCPUs).
	Note  string `json:"note,omitempty"`
	Cause string `json:"likelyCause,omitempty"`
}

// Any reports whether some field differs.
func (x *SNPExplanation) Any() bool { return x.First != nil }

// ExplainSNP compares the report's POLICY, MEASUREMENT, HOST_DATA and
// REPORTED_TCB with the reference document (berth refvalues for an SNP
// platform).
func ExplainSNP(r *SNPReport, ref *Document) *SNPExplanation {
	x := &SNPExplanation{Report: r}
	x.Checks = append(x.Checks, checkPolicy(r, uint64(ref.SNP.GuestPolicy)), checkMeasurement(r, ref.SNP), checkHostData(r, ref.InitData))
	if c, ok := checkTCB(r, ref.SNP); ok {
		x.Checks = append(x.Checks, c)
	}
	for i := range x.Checks {
		if !x.Checks[i].Match {
			x.First = &x.Checks[i]
			break
		}
	}
	return x
}

func checkPolicy(r *SNPReport, want uint64) SNPCheck {
	c := SNPCheck{Field: "POLICY", Offset: 0x8, Report: fmt.Sprintf("%#x", uint64(r.Policy)), Expected: fmt.Sprintf("%#x", want), Match: uint64(r.Policy) == want}
	if c.Match {
		return c
	}
	diff := uint64(r.Policy) ^ want
	var names []string
	for _, p := range snpPolicyBits {
		if diff&p.bit != 0 {
			state := "cleared"
			if uint64(r.Policy)&p.bit != 0 {
				state = "set"
			}
			names = append(names, p.name+" "+state)
		}
	}
	if diff&0xffff != 0 {
		names = append(names, fmt.Sprintf("minimum ABI %d.%d instead of %d.%d", r.Policy>>8&0xff, r.Policy&0xff, want>>8&0xff, want&0xff))
	}
	c.Cause = "the guest was launched with another policy (Kata's snp_guest_policy, QEMU's sev-snp-guest policy=; refvalues --policy): " + strings.Join(names, ", ")
	if uint64(r.Policy)&snpPolicyDebug != 0 {
		c.Cause += "; a guest with DEBUG can be read by the host and must not be trusted"
	}
	return c
}

func checkMeasurement(r *SNPReport, v *SNPValues) SNPCheck {
	c := SNPCheck{Field: "MEASUREMENT", Offset: 0x90, Report: r.Measurement.String()}
	host := r.CPUID.ProductLine()
	var lines []string
	lo, hi := 0, 0
	for _, set := range v.Sets {
		name := string(set.ProductLine)
		if name == "" {
			name = set.VCPUType
		}
		lines = append(lines, name)
		for _, ld := range set.LaunchDigests {
			if lo == 0 || ld.VCPUs < lo {
				lo = ld.VCPUs
			}
			hi = max(hi, ld.VCPUs)
			if ld.Digest == r.Measurement {
				c.Match, c.Expected = true, ld.Digest.String()
				c.Note = fmt.Sprintf("%s, %d vCPUs", name, ld.VCPUs)
				if host != "" && set.ProductLine != "" && set.ProductLine != host {
					c.Note += fmt.Sprintf(" (the report's host is %s: the guest ran with another product line's vCPU type)", host)
				}
				return c
			}
		}
	}
	c.Expected = fmt.Sprintf("one of the %s launch digests for %d-%d vCPUs", strings.Join(lines, "/"), lo, hi)
	var causes []string
	if host != "" && !strings.Contains(strings.Join(lines, " "), string(host)) {
		causes = append(causes, fmt.Sprintf("the report comes from a %s host and the reference has no %s values (the vCPU type is measured): compute them for that product line", host, host))
	}
	causes = append(causes,
		fmt.Sprintf("a vCPU count outside %d-%d (Kata's default_vcpus plus the pod's CPU limits; refvalues --vcpus)", lo, hi),
		"another kernel command line (Kata adds its own parameters, and a pod's kernel_params annotation or the debug class change them: refvalues --manifest/--installed derive Kata's line)",
		"another firmware, kernel or initrd than the reference's inputs",
		"other guest features (SEV_FEATURES in the VMSA; refvalues --guest-features)")
	c.Cause = strings.Join(causes, "; or ")
	return c
}

func checkHostData(r *SNPReport, init *InitDataValues) SNPCheck {
	c := SNPCheck{Field: "HOST_DATA", Offset: 0xc0, Report: r.HostData}
	if init != nil && init.HostData != "" {
		c.Expected = init.HostData
		c.Match = strings.EqualFold(r.HostData, init.HostData)
		if !c.Match {
			c.Cause = "another init-data document (the pod's cc_init_data annotation) than " + init.Source + ", or none: Kata puts the init-data digest into HOST_DATA"
			if r.hostData == ([32]byte{}) {
				c.Cause = "the guest was started without init-data (no cc_init_data annotation, or a Kata without init-data support), the reference expects " + init.Source
			}
		}
		return c
	}
	c.Expected = strings.Repeat("0", 64)
	c.Match = r.hostData == [32]byte{}
	c.Note = "the reference has no init-data (refvalues --initdata)"
	if !c.Match {
		c.Cause = "the guest was started with init-data (a cc_init_data annotation) or other host data: give refvalues --initdata with the pod's document"
	}
	return c
}

// checkTCB compares REPORTED_TCB with the minimum TCB of the report's
// product line, when the reference knows it.
func checkTCB(r *SNPReport, v *SNPValues) (SNPCheck, bool) {
	host := r.CPUID.ProductLine()
	for _, set := range v.Sets {
		if set.MinimumTCB == nil || (host != "" && set.ProductLine != host) || (host == "" && len(v.Sets) > 1) {
			continue
		}
		c := SNPCheck{Field: "REPORTED_TCB", Offset: 0x180, Report: fmt.Sprintf("%#016x", uint64(r.ReportedTCB)), Match: true}
		var want, low []string
		for _, f := range set.MinimumTCB.Fields {
			if f.Value == nil {
				continue
			}
			got := uint8(uint64(r.ReportedTCB) >> (8 * f.Byte))
			want = append(want, fmt.Sprintf("%s >= %d", f.Name, *f.Value))
			if got < *f.Value {
				c.Match = false
				low = append(low, fmt.Sprintf("%s %d < %d", f.Name, got, *f.Value))
			}
		}
		if len(want) == 0 {
			return SNPCheck{}, false // the operator has not confirmed a minimum
		}
		c.Expected = strings.Join(want, ", ")
		if !c.Match {
			c.Cause = "the host's SEV firmware or microcode is older than the minimum (" + strings.Join(low, ", ") + "): update the host, or the minimum was taken on another node"
		}
		return c, true
	}
	return SNPCheck{}, false
}

// WriteTable prints the comparison for a terminal.
func (x *SNPExplanation) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	r := x.Report
	fmt.Fprintf(&b, "SNP report version %d, VMPL %d, signed by %s", r.Version, r.VMPL, r.SigningKey)
	if r.CPUID != nil {
		fmt.Fprintf(&b, ", host CPU family %#x model %#x stepping %d", r.CPUID.Family, r.CPUID.Model, r.CPUID.Stepping)
		if pl := r.CPUID.ProductLine(); pl != "" {
			fmt.Fprintf(&b, " (%s)", pl)
		}
	}
	b.WriteString("\n")
	for _, c := range x.Checks {
		state := "match"
		if !c.Match {
			state = "DIFFERS"
		}
		fmt.Fprintf(&b, "%-13s (offset %#x)  %s\n  report    %s\n  expected  %s\n", c.Field, c.Offset, state, c.Report, c.Expected)
		if c.Note != "" {
			fmt.Fprintf(&b, "  (%s)\n", c.Note)
		}
		if c.Cause != "" {
			fmt.Fprintf(&b, "  likely cause: %s\n", c.Cause)
		}
	}
	if x.First != nil {
		fmt.Fprintf(&b, "first difference: %s\n", x.First.Field)
	}
	_, err := w.Write(b.Bytes())
	return err
}
