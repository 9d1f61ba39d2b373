package refvalues

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// RVPSMessageVersion is the version of the message Trustee's reference
// value provider service accepts (rvps/src/lib.rs, MESSAGE_VERSION): the
// service refuses any other.
const RVPSMessageVersion = "0.1.0"

// RVPSMessage is what Trustee's RVPS registers (rvps-tool register --path
// FILE, or the RVPS gRPC RegisterReferenceValue call): a provenance of a
// given type, carried as a string. berth emits the "sample" type, whose
// payload is the base64 of a JSON object mapping each reference-value name
// to its value; the service stamps each with a 12-month expiration itself.
type RVPSMessage struct {
	Version string `json:"version"`
	Type    string `json:"type"`
	Payload string `json:"payload"`
}

// RVPS names the reference values the way Trustee's default attestation
// policy queries them (attestation-service/src/ear_token/
// ear_default_policy_cpu.rego): "in" checks get lists, "==" checks a
// single value. Values berth does not know (the TCB without node facts,
// TDX RTMRs, platform SMT/TSME) are left out, and named in the returned
// notes, rather than guessed: the policy then fails closed on them.
func (d *Document) RVPS() (*RVPSMessage, map[string]any, []string, error) {
	rv := map[string]any{}
	var notes []string
	switch {
	case d.SNP != nil:
		s := d.SNP
		var digests []string
		for _, set := range s.Sets {
			for _, ld := range set.LaunchDigests {
				digests = appendUnique(digests, ld.Digest.String())
			}
		}
		rv["snp_launch_measurement"] = digests
		p := uint64(s.GuestPolicy)
		rv["snp_guest_abi_minor"] = p & 0xff
		rv["snp_guest_abi_major"] = (p >> 8) & 0xff
		rv["snp_smt_allowed"] = p&(1<<16) != 0
		rv["snp_single_socket"] = p&(1<<20) != 0
		tcb := map[string]string{"bootloader": "snp_bootloader", "tee": "snp_tee_svn", "snp": "snp_snp_svn", "microcode": "snp_microcode"}
		// []int, not []uint8: encoding/json writes byte slices as base64.
		known := map[string][]int{}
		for _, set := range s.Sets {
			if set.MinimumTCB == nil {
				continue
			}
			for _, f := range set.MinimumTCB.Fields {
				if name, ok := tcb[f.Name]; ok && f.Value != nil {
					known[name] = appendUnique(known[name], int(*f.Value))
				}
			}
		}
		for _, name := range []string{"snp_bootloader", "snp_tee_svn", "snp_snp_svn", "snp_microcode"} {
			if v, ok := known[name]; ok {
				rv[name] = v
			} else {
				notes = append(notes, name+": unknown without the node's TCB (--facts or --node); left out, so the policy's hardware check fails until it is registered")
			}
		}
		notes = append(notes, "snp_smt_enabled, snp_tsme_enabled: platform settings of the node, not reference values of the boot components; left out")
	case d.TDX != nil:
		rv["mr_td"] = []string{d.TDX.MRTD.String()}
		if r := d.TDX.RTMR; r != nil {
			// RTMR0 holds the TD HOB and ACPI tables, which the default
			// policy does not query; RTMR1 (kernel) and RTMR2 (command
			// line, initrd) are the values it compares.
			rv["rtmr_1"] = []string{r.RTMR[1].String()}
			rv["rtmr_2"] = []string{r.RTMR[2].String()}
			notes = append(notes, r.sourceNote())
		} else {
			notes = append(notes, "rtmr_1, rtmr_2: need the direct-boot kernel (--kernel, with --memory and --qemu); left out")
		}
	default:
		return nil, nil, nil, fmt.Errorf("document has neither snp nor tdx values: nothing to export")
	}
	notes = d.InitData.rvps(rv, notes)
	payload, err := json.Marshal(rv)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encoding the RVPS sample provenance: %w", err)
	}
	return &RVPSMessage{Version: RVPSMessageVersion, Type: "sample", Payload: base64.StdEncoding.EncodeToString(payload)}, rv, notes, nil
}

func appendUnique[T comparable](s []T, v T) []T {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}
