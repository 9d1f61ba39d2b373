package discover

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// sevProbeName is the recorded probe holding what /dev/sev returned.
const sevProbeName = "sev"

// sevProbe is what the /dev/sev probe read, as recorded in a snapshot's
// .berth/recorded.json: the firmware's own structures, hex encoded, so
// that an offline root is parsed by the same code as the live device.
type sevProbe struct {
	// SNPPlatformStatus is struct sev_user_data_snp_status (Linux
	// include/uapi/linux/psp-sev.h) as SNP_PLATFORM_STATUS filled it.
	SNPPlatformStatus string `json:"snpPlatformStatus,omitempty"`
	// ChipID is the SEV_GET_ID2 output: 64 bytes per socket.
	ChipID string `json:"chipId,omitempty"`
	// Error is why the status could not be read; ChipIDError why the
	// chip ID could not (the TCB is still usable then).
	Error       string `json:"error,omitempty"`
	Errno       string `json:"errno,omitempty"`
	ChipIDError string `json:"chipIdError,omitempty"`
}

// snpStatusSize is sizeof(struct sev_user_data_snp_status): api_major,
// api_minor, state, flags (u8 each), build_id u32, flags u32, guest_count
// u32, current_tcb_version u64, reported_tcb_version u64; packed.
const snpStatusSize = 32

// chipIDSize is the size of one socket's chip ID; maxChipID bounds the
// sockets accepted from a recorded file.
const (
	chipIDSize = 64
	maxChipID  = 8 * chipIDSize
)

// snpStatus is the part of SNP_PLATFORM_STATUS berth uses.
type snpStatus struct {
	APIMajor, APIMinor uint8
	BuildID            uint32
	Current, Reported  uint64
}

// parseSNPStatus decodes struct sev_user_data_snp_status.
func parseSNPStatus(b []byte) (snpStatus, error) {
	if len(b) != snpStatusSize {
		return snpStatus{}, fmt.Errorf("SNP platform status is %d bytes, expected %d (struct sev_user_data_snp_status)", len(b), snpStatusSize)
	}
	return snpStatus{
		APIMajor: b[0], APIMinor: b[1],
		BuildID:  binary.LittleEndian.Uint32(b[4:]),
		Current:  binary.LittleEndian.Uint64(b[16:]),
		Reported: binary.LittleEndian.Uint64(b[24:]),
	}, nil
}

// parseSEVProbe turns a probe record (live or recorded) into the fact,
// refusing anything malformed: a TCB berth is not sure of must not become
// a reference value.
func parseSEVProbe(p sevProbe, source string) (*facts.SNPTCB, error) {
	if p.Error != "" {
		return nil, errors.New(p.Error)
	}
	raw, err := hex.DecodeString(p.SNPPlatformStatus)
	if err != nil {
		return nil, fmt.Errorf("snpPlatformStatus: not hex: %w", err)
	}
	st, err := parseSNPStatus(raw)
	if err != nil {
		return nil, fmt.Errorf("snpPlatformStatus: %w", err)
	}
	t := &facts.SNPTCB{Current: fmt.Sprintf("%#016x", st.Current), Reported: fmt.Sprintf("%#016x", st.Reported), Source: source}
	if p.ChipID != "" {
		id, err := hex.DecodeString(p.ChipID)
		if err != nil {
			return nil, fmt.Errorf("chipId: not hex: %w", err)
		}
		if len(id) == 0 || len(id)%chipIDSize != 0 || len(id) > maxChipID {
			return nil, fmt.Errorf("chipId: %d bytes, expected %d per socket, at most %d", len(id), chipIDSize, maxChipID)
		}
		t.ChipID = hex.EncodeToString(id)
	}
	return t, nil
}

// snpTCB reads the firmware's TCB: on a live root through read-only
// ioctls on dev/sev (recorded for snapshots), on an offline root from the
// recorded probe only; a fixture file standing for dev/sev is never
// opened. Only asked on hosts where SEV is in play (dev/sev or kvm_amd's
// sev parameter exist), so that other hosts carry no unknown entry for it.
func (s *session) snpTCB(snp *facts.SNP) *facts.SNPTCB {
	const field = "tee.snp.tcb"
	if !s.exists("dev/sev") {
		if snp.KVMSEV != nil {
			s.unknownf(field, "%s: no /dev/sev (ccp module not loaded, or SEV off in BIOS)", facts.ReasonMissing)
		}
		return nil
	}
	var p sevProbe
	var source string
	if s.root.Live() {
		name := filepath.Join(s.root.Path(), "dev", "sev")
		open := func() (int, error) { return syscall.Open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0) }
		if d, ok := s.root.(deviceOpener); ok {
			open = func() (int, error) { return d.OpenDevice("dev/sev", syscall.O_RDONLY|syscall.O_CLOEXEC) }
		}
		p = probeSEV(open, name)
		hostfs.RecordProbe(s.root, sevProbeName, p)
		source = "SNP_PLATFORM_STATUS and SEV_GET_ID2 ioctls on /dev/sev"
	} else {
		switch err := s.root.Probe(sevProbeName, &p); {
		case errors.Is(err, hostfs.ErrOffline):
			s.unknownf(field, "%s: no recorded /dev/sev probe (only a live root, or a snapshot of one, has the TCB)", facts.ReasonOffline)
			return nil
		case err != nil:
			s.unknownf(field, "%s: %v", facts.ReasonUnparseable, err)
			return nil
		}
		source = "recorded /dev/sev probe (" + hostfs.RecordedFile + ")"
	}
	t, err := parseSEVProbe(p, source)
	switch {
	case err != nil && (p.Errno == "EACCES" || p.Errno == "EPERM"):
		s.unknownf(field, "%s: %v", facts.ReasonPermission, err)
		return nil
	case err != nil && p.Error != "":
		s.unknownf(field, "%s: %v", facts.ReasonMissing, err)
		return nil
	case err != nil:
		s.unknownf(field, "%s: %v", facts.ReasonUnparseable, err)
		return nil
	}
	t.Recorded = !s.root.Live()
	return t
}
