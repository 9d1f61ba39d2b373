package refvalues

import (
	"fmt"
)

// ContrastReferenceValues is the shape of the ReferenceValues of a
// Contrast manifest (edgelesssys/contrast v1.10.0,
// internal/manifest/referencevalues.go: type ReferenceValues), so that an
// operator can paste it into manifest.json. Contrast decodes these with
// encoding/json and Go field names, hence no tags.
type ContrastReferenceValues struct {
	SNP []ContrastSNP `json:"snp,omitempty"`
	TDX []ContrastTDX `json:"tdx,omitempty"`
}

// ContrastSNP is one accepted SEV-SNP configuration (Contrast's
// SNPReferenceValues). Contrast accepts a report matching ANY entry, so each
// launch digest of each product line becomes its own entry.
type ContrastSNP struct {
	MinimumTCB         ContrastTCB
	ProductName        string
	TrustedMeasurement string
	GuestPolicy        ContrastGuestPolicy
}

// ContrastTCB is Contrast's SNPTCB: nil (JSON null) is a value the
// operator still has to fill; Contrast refuses the manifest until then.
type ContrastTCB struct {
	BootloaderVersion *uint8
	TEEVersion        *uint8
	SNPVersion        *uint8
	MicrocodeVersion  *uint8
}

// ContrastGuestPolicy is go-sev-guest's abi.SnpPolicy as Contrast embeds it:
// the guest policy bits by name.
type ContrastGuestPolicy struct {
	ABIMinor             uint8
	ABIMajor             uint8
	SMT                  bool
	MigrateMA            bool
	Debug                bool
	SingleSocket         bool
	CXLAllowed           bool
	MemAES256XTS         bool
	RAPLDis              bool
	CipherTextHidingDRAM bool
}

// ContrastTDX is Contrast's TDXReferenceValues. berth knows MRTD, and
// RTMR0-2 of a direct boot when the kernel was given; the other fields are
// empty (or null) for the operator to fill.
type ContrastTDX struct {
	MrTd             string
	Rtrms            [4]string
	MinimumQeSvn     *uint16
	MinimumPceSvn    *uint16
	MinimumTeeTcbSvn string
	MrSeam           string
	TdAttributes     string
	Xfam             string
}

// contrastProducts are the SNP product names Contrast v1.10.0 accepts
// (SNPReferenceValues.Validate).
var contrastProducts = map[ProductLine]bool{Milan: true, Genoa: true}

// contrastPolicyBits are the guest policy bits Contrast's SnpPolicy
// represents: ABI minor/major (0-15), SMT 16, the must-be-one bit 17,
// MigrateMA 18, Debug 19, SingleSocket 20, CXL 21, AES-256-XTS 22, RAPL
// 23, ciphertext hiding 24. A policy with any other bit set cannot be
// expressed, and must not be exported as if it could.
const contrastPolicyBits = 1<<25 - 1

// Contrast converts the document to Contrast's reference values. Product
// lines Contrast does not know (Turin) are left out and named in the
// returned notes; a document holding only such lines is an error, as is a
// policy Contrast cannot express.
func (d *Document) Contrast() (*ContrastReferenceValues, []string, error) {
	var out ContrastReferenceValues
	var notes []string
	switch {
	case d.SNP != nil:
		s := d.SNP
		p := uint64(s.GuestPolicy)
		if p&^contrastPolicyBits != 0 {
			return nil, nil, fmt.Errorf("guest policy %#x sets bits %#x that Contrast's guest policy cannot express", p, p&^contrastPolicyBits)
		}
		pol := ContrastGuestPolicy{
			ABIMinor: uint8(p), ABIMajor: uint8(p >> 8),
			SMT: p&(1<<16) != 0, MigrateMA: p&(1<<18) != 0, Debug: p&(1<<19) != 0, SingleSocket: p&(1<<20) != 0,
			CXLAllowed: p&(1<<21) != 0, MemAES256XTS: p&(1<<22) != 0, RAPLDis: p&(1<<23) != 0, CipherTextHidingDRAM: p&(1<<24) != 0,
		}
		for _, set := range s.Sets {
			if !contrastProducts[set.ProductLine] {
				line := string(set.ProductLine)
				if line == "" {
					line = "vCPU type " + set.VCPUType + " without a product line"
				}
				notes = append(notes, fmt.Sprintf("%s: Contrast v1.10.0 accepts product names Milan and Genoa only; left out", line))
				continue
			}
			var tcb ContrastTCB
			unknown := 0
			if set.MinimumTCB != nil {
				for _, f := range set.MinimumTCB.Fields {
					switch f.Name {
					case "bootloader":
						tcb.BootloaderVersion = f.Value
					case "tee":
						tcb.TEEVersion = f.Value
					case "snp":
						tcb.SNPVersion = f.Value
					case "microcode":
						tcb.MicrocodeVersion = f.Value
					}
				}
			}
			for _, v := range []*uint8{tcb.BootloaderVersion, tcb.TEEVersion, tcb.SNPVersion, tcb.MicrocodeVersion} {
				if v == nil {
					unknown++
				}
			}
			if unknown > 0 {
				notes = append(notes, fmt.Sprintf("%s: MinimumTCB has %d null field(s) the operator must fill (give --facts or --node to take them from the node); Contrast refuses null", set.ProductLine, unknown))
			}
			for _, ld := range set.LaunchDigests {
				out.SNP = append(out.SNP, ContrastSNP{MinimumTCB: tcb, ProductName: string(set.ProductLine), TrustedMeasurement: ld.Digest.String(), GuestPolicy: pol})
			}
		}
		if len(out.SNP) == 0 {
			return nil, notes, fmt.Errorf("no product line Contrast accepts (Milan, Genoa) in the values: nothing to export")
		}
	case d.TDX != nil:
		td := ContrastTDX{MrTd: d.TDX.MRTD.String()}
		if r := d.TDX.RTMR; r != nil {
			// RTMR3 is extended at run time, not at boot: left empty.
			for i, v := range r.RTMR {
				td.Rtrms[i] = v.String()
			}
			notes = append(notes, r.sourceNote())
			notes = append(notes, "Rtrms[3], MinimumQeSvn, MinimumPceSvn, MinimumTeeTcbSvn, MrSeam, TdAttributes, Xfam: not computed by berth; empty for the operator to fill")
		} else {
			notes = append(notes, "Rtrms (give --kernel, --memory and --qemu for RTMR0-2), MinimumQeSvn, MinimumPceSvn, MinimumTeeTcbSvn, MrSeam, TdAttributes, Xfam: not computed by berth; empty for the operator to fill")
		}
		out.TDX = []ContrastTDX{td}
	default:
		return nil, nil, fmt.Errorf("document has neither snp nor tdx values: nothing to export")
	}
	if d.InitData != nil {
		notes = append(notes, d.InitData.contrastNote())
	}
	return &out, notes, nil
}
