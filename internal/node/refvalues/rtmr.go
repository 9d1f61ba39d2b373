package refvalues

import (
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"unicode/utf16"
)

// TDXEvent is one measurement the firmware extends into an RTMR.
type TDXEvent struct {
	RTMR   int       `json:"rtmr"`
	Event  string    `json:"event"`
	Digest Digest384 `json:"digest"`
}

// RTMRs are RTMR0-2 of a TD booted directly (QEMU -kernel) by TDVF, with
// the event log that produces them.
type RTMRs struct {
	RTMR   [3]Digest384 `json:"rtmr"`
	Events []TDXEvent   `json:"events"`
	// Source is SourceFwCfg or SourceModel: where RTMR1 and RTMR2's
	// kernel, initrd and command line came from.
	Source string `json:"source"`
}

// EDK2Profile selects the measurement differences between edk2 releases.
type EDK2Profile int

// The edk2 releases whose direct-boot event logs differ.
const (
	// EDK2Default is the event log of edk2 releases from 2022.11 to
	// 2025.02 apart from 2024.08.01: RTMR1 carries a separator between the
	// boot-option and Exit Boot Services events.
	EDK2Default EDK2Profile = iota
	// EDK2Stable202408 is edk2-stable202408(.01): the separator closes
	// RTMR0 instead of sitting in RTMR1.
	EDK2Stable202408
	// EDK2Auto picks the profile from the version the firmware image
	// carries (ReadFirmwareVersion).
	EDK2Auto
	// EDK2Stable202505 is edk2-stable202505 (and 202505 builds): as
	// EDK2Default, and RTMR0 also measures the fw_cfg items edk2 caches
	// (after the CFV) and the SMBIOS tables (after the ACPI tables).
	EDK2Stable202505
	// EDK2Stable202508 is edk2-stable202508 and later: as
	// EDK2Stable202505, with "initrd=initrd " put before the command line
	// in the LoadOptions the kernel measures into RTMR2.
	EDK2Stable202508
)

// measuresPlatform says whether the profile measures the cached fw_cfg
// items and the SMBIOS tables.
func (p EDK2Profile) measuresPlatform() bool {
	return p == EDK2Stable202505 || p == EDK2Stable202508
}

// LoadOptions is the command line edk2's X86QemuLoadImageLib hands the
// kernel (and the kernel's EFI stub measures): QEMU's -append value with
// "initrd=initrd" added when an initrd is loaded, so that the stub finds
// it on edk2's kernel file system. Up to edk2-stable202505 it is appended
// (" initrd=initrd"); from edk2-stable202508 (commit a2ac0fea49) it comes
// first ("initrd=initrd "), so that a later initrd= of the user wins.
func (p EDK2Profile) LoadOptions(cmdline string, initrd bool) string {
	switch {
	case !initrd:
		return cmdline
	case p == EDK2Stable202508:
		return "initrd=initrd " + cmdline
	}
	return cmdline + " initrd=initrd"
}

// ParseEDK2Profile parses "auto", "default", "202408", "202505" or
// "202508".
func ParseEDK2Profile(s string) (EDK2Profile, error) {
	switch s {
	case "auto":
		return EDK2Auto, nil
	case "", "default":
		return EDK2Default, nil
	case "202408", "edk2-stable202408", "edk2-stable202408.01":
		return EDK2Stable202408, nil
	case "202505", "edk2-stable202505":
		return EDK2Stable202505, nil
	case "202508", "edk2-stable202508":
		return EDK2Stable202508, nil
	}
	return 0, fmt.Errorf("unknown edk2 event-log profile %q: expected auto, default, 202408, 202505 or 202508", s)
}

// RTMRRequest holds the inputs of RTMR0-2.
type RTMRRequest struct {
	Firmware *TDVF
	// MemoryMiB is the guest memory (QEMU -m).
	MemoryMiB uint64
	// ACPI are QEMU's ACPI fw_cfg blobs for the guest (DumpACPIBlobs).
	ACPI *ACPIBlobs
	// Kernel is the EFI-stub bzImage.
	Kernel []byte
	// Initrd is nil without an initrd.
	Initrd []byte
	// Cmdline is the -append value ("" when not given).
	Cmdline string
	// QEMUMajor is QEMU's major version: before 10 QEMU hands the firmware
	// a kernel with a patched setup header.
	QEMUMajor int
	Profile   EDK2Profile
	// FwCfg, when set, is what QEMU handed the firmware (DumpBootBlobs):
	// RTMR1 and RTMR2 then measure its kernel, initrd and command line
	// instead of the model's patch of Kernel, Initrd and Cmdline.
	FwCfg *FwCfgBoot
}

// extend folds a digest into a register: RTMR = SHA-384(RTMR || digest).
func extend(mr *Digest384, d Digest384) {
	h := sha512.New384()
	h.Write(mr[:])
	h.Write(d[:])
	h.Sum(mr[:0])
}

func sha384(b ...[]byte) Digest384 {
	h := sha512.New384()
	for _, p := range b {
		h.Write(p)
	}
	var d Digest384
	h.Sum(d[:0])
	return d
}

// utf16NUL encodes s as UTF-16LE with a terminating NUL, as edk2 keeps
// strings it measures (CHAR16).
func utf16NUL(s string) []byte {
	u := utf16.Encode([]rune(s))
	out := make([]byte, 0, 2*len(u)+2)
	for _, c := range u {
		out = binary.LittleEndian.AppendUint16(out, c)
	}
	return append(out, 0, 0)
}

// GUIDs of the measured UEFI variables, in their in-memory byte order.
var (
	efiGlobalVariable  = mustGUIDBytes("8be4df61-93ca-11d2-aa0d-00e098032b8c")
	efiImageSecurityDB = mustGUIDBytes("d719b2cb-3d3a-4596-a3bc-dad00e67656f")
)

func mustGUIDBytes(s string) []byte {
	g, err := ParseGUID(s)
	if err != nil {
		panic(err)
	}
	return g[:]
}

// uefiVariableData is the UEFI_VARIABLE_DATA the firmware measures for a
// Secure Boot variable (TCG PC Client PFP, EV_EFI_VARIABLE_DRIVER_CONFIG).
func uefiVariableData(guid []byte, name string, data []byte) []byte {
	u := utf16.Encode([]rune(name))
	out := append([]byte{}, guid...)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(u)))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(data)))
	for _, c := range u {
		out = binary.LittleEndian.AppendUint16(out, c)
	}
	return append(out, data...)
}

// Load option attributes (UEFI LOAD_OPTION_*).
const (
	loadOptionActive   = 1
	loadOptionHidden   = 1 << 3
	loadOptionCategory = 1 << 8 // application
)

// OVMF's boot-manager applications, files in its DXE volume.
const (
	uiAppFile          = "462caa21-7614-4503-836e-8ab6f4662331"
	bootManagerMenuApp = "eec25bdc-67f2-4d95-b1d5-f81b2039d11d"
)

// bootOption0000 is the Boot0000 load option OVMF up to edk2 2025.02
// creates for its UiApp when no disk is bootable: active, hidden,
// application category, named "UiApp".
func bootOption0000() []byte {
	return loadOption(loadOptionActive|loadOptionHidden|loadOptionCategory, "UiApp", uiAppFile)
}

// bootVariables are the boot variables edk2 measures into RTMR0 when no
// disk is bootable: BootOrder and each Boot#### it lists. Up to edk2
// 2025.02 (berth's default profile) OVMF creates only the hidden boot
// manager menu option, then the UiApp. From edk2-stable202505 the boot
// manager menu is the BootManagerMenuApp (OvmfPkgX64.dsc
// PcdBootManagerMenuFile) and OVMF also registers the UiApp as "EFI
// Firmware Setup" (commit d433b4c8e4), unless QEMU is given
// opt/org.tianocore/FirmwareSetupSupport=no, which Kata does not pass;
// Debian sid's 2026.08 build, booted with a TPM (testdata/tpmlog), measures
// exactly these.
func bootVariables(p EDK2Profile) []FwCfgFile {
	if !p.measuresPlatform() {
		return []FwCfgFile{{Name: "BootOrder", Data: []byte{0, 0}}, {Name: "Boot0000", Data: bootOption0000()}}
	}
	return []FwCfgFile{
		{Name: "BootOrder", Data: []byte{0, 0, 1, 0}},
		{Name: "Boot0000", Data: loadOption(loadOptionActive|loadOptionHidden|loadOptionCategory, "BootManagerMenuApp", bootManagerMenuApp)},
		{Name: "Boot0001", Data: loadOption(loadOptionActive|loadOptionCategory, "EFI Firmware Setup", uiAppFile)},
	}
}

// loadOption is an EFI_LOAD_OPTION with a device path to file in OVMF's
// DXE volume.
func loadOption(attrs uint32, desc, fileGUID string) []byte {
	fv := mustGUIDBytes("7cb8bdc9-f8eb-4f34-aaea-3ee4af6516a1")
	file := mustGUIDBytes(fileGUID)
	var path []byte
	path = append(path, 4, 7, 20, 0) // media, PIWG firmware volume
	path = append(path, fv...)
	path = append(path, 4, 6, 20, 0) // media, PIWG firmware file
	path = append(path, file...)
	path = append(path, 0x7f, 0xff, 4, 0) // end of device path
	out := binary.LittleEndian.AppendUint32(nil, attrs)
	out = binary.LittleEndian.AppendUint16(out, uint16(len(path)))
	out = append(out, utf16NUL(desc)...)
	return append(out, path...)
}

// Measured event strings (TCG PC Client PFP, EV_EFI_ACTION).
const (
	evCallingEFIApp = "Calling EFI Application from Boot Option"
	evExitBSInvoke  = "Exit Boot Services Invocation"
	evExitBSSuccess = "Exit Boot Services Returned with Success"
)

// cfvSection returns the configuration firmware volume.
func (t *TDVF) cfvSection() ([]byte, error) {
	for _, s := range t.Sections {
		if s.Type == TDVFSectionCFV {
			return t.Image[s.DataOffset : s.DataOffset+s.RawSize], nil
		}
	}
	return nil, fmt.Errorf("TDVF metadata has no CFV section: the firmware has no variable store to measure")
}

// DirectBootCmdline is the command line edk2 releases before 202508 give
// the kernel (EDK2Default.LoadOptions).
func DirectBootCmdline(cmdline string, initrd bool) string {
	return EDK2Default.LoadOptions(cmdline, initrd)
}

// ComputeRTMRs replays the TDVF direct-boot event log for RTMR0-2.
func ComputeRTMRs(req RTMRRequest) (*RTMRs, error) {
	if req.Profile == EDK2Auto {
		return nil, fmt.Errorf("edk2 profile auto is resolved from the firmware image (resolveEDK2) before the events are computed")
	}
	r := &RTMRs{Source: SourceModel}
	if req.FwCfg != nil {
		r.Source = SourceFwCfg
	}
	for _, f := range []func(RTMRRequest) ([]TDXEvent, error){rtmr0Events, rtmr1Events, rtmr2Events} {
		evs, err := f(req)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			r.Events = append(r.Events, e)
			extend(&r.RTMR[e.RTMR], e.Digest)
		}
	}
	return r, nil
}

// replay extends events into fresh registers.
func replay(evs []TDXEvent) [3]Digest384 {
	var mr [3]Digest384
	for _, e := range evs {
		extend(&mr[e.RTMR], e.Digest)
	}
	return mr
}

var separatorDigest = sha384([]byte{0, 0, 0, 0})

// rtmr0Events are the firmware's configuration measurements: the TD HOB,
// the variable store, the (empty) Secure Boot variables, QEMU's ACPI blobs
// in the loader's allocation order and the boot variables.
func rtmr0Events(req RTMRRequest) ([]TDXEvent, error) {
	if req.Firmware == nil {
		return nil, fmt.Errorf("no firmware given: RTMR0 measures the TDVF hand-off block and variable store")
	}
	if req.ACPI == nil {
		return nil, fmt.Errorf("no ACPI tables given: RTMR0 measures QEMU's ACPI fw_cfg blobs")
	}
	cfv, err := req.Firmware.cfvSection()
	if err != nil {
		return nil, err
	}
	if err := checkSecureBoot(cfv); err != nil {
		return nil, err
	}
	hob, err := TDHOB(req.Firmware, req.MemoryMiB)
	if err != nil {
		return nil, err
	}
	if _, err := loaderAllocations(req.ACPI.Loader); err != nil {
		return nil, err
	}
	var evs []TDXEvent
	add := func(name string, d Digest384) { evs = append(evs, TDXEvent{RTMR: 0, Event: name, Digest: d}) }
	var smbios []byte
	if req.Profile.measuresPlatform() {
		if req.ACPI.Platform == nil {
			return nil, fmt.Errorf("edk2 2025.05 and later measure QEMU's fw_cfg items and SMBIOS tables into RTMR0, and the ACPI dump holds none (dump it again)")
		}
		if smbios, err = req.ACPI.Platform.SMBIOSMeasured(func() ([]byte, error) { return FirmwareSMBIOSType0(req.Firmware.Image) }); err != nil {
			return nil, err
		}
	}
	add("TD HOB", sha384(hob))
	add("Configuration FV", sha384(cfv))
	if req.Profile.measuresPlatform() {
		for _, f := range req.ACPI.Platform.FwCfg {
			add("QEMU FW CFG "+f.Name, sha384(f.Data))
		}
	}
	add("SecureBoot", sha384(uefiVariableData(efiGlobalVariable, "SecureBoot", nil)))
	add("PK", sha384(uefiVariableData(efiGlobalVariable, "PK", nil)))
	add("KEK", sha384(uefiVariableData(efiGlobalVariable, "KEK", nil)))
	add("db", sha384(uefiVariableData(efiImageSecurityDB, "db", nil)))
	add("dbx", sha384(uefiVariableData(efiImageSecurityDB, "dbx", nil)))
	add("separator", separatorDigest)
	add(tableLoaderFile, sha384(req.ACPI.Loader))
	for _, f := range req.ACPI.Files {
		add(f.Name, sha384(f.Data))
	}
	if smbios != nil {
		add("SMBIOS tables", sha384(smbios))
	}
	for _, v := range bootVariables(req.Profile) {
		add(v.Name, sha384(v.Data))
	}
	if req.Profile == EDK2Stable202408 {
		add("separator", separatorDigest)
	}
	return evs, nil
}

// measuredKernel returns the kernel bytes the firmware receives: what QEMU
// handed over when it was asked, else the model's: before QEMU 10 a copy
// with QEMU's setup-header patch.
func measuredKernel(req RTMRRequest) ([]byte, error) {
	if len(req.Kernel) == 0 {
		return nil, fmt.Errorf("no kernel given: RTMR1 measures the direct-boot kernel")
	}
	if err := checkSetup(req.Kernel, int64(len(req.Kernel))); err != nil {
		return nil, err
	}
	if req.FwCfg != nil {
		return req.FwCfg.FirmwareKernel(req.QEMUMajor), nil
	}
	if req.QEMUMajor >= 10 {
		return req.Kernel, nil
	}
	var p qemuSetupPatch
	if len(req.Initrd) > 0 {
		if uint64(len(req.Initrd)) > 1<<32-1 {
			return nil, fmt.Errorf("initrd of %d bytes is larger than QEMU loads", len(req.Initrd))
		}
		if len(req.Kernel) < setupInitrdMax+4 {
			return nil, fmt.Errorf("kernel of %d bytes has no Linux x86 setup header", len(req.Kernel))
		}
		p.initrdSize = uint32(len(req.Initrd))
		var err error
		if p.initrdAddr, err = qemuInitrdAddr(req.Kernel, p.initrdSize, q35LowMem(req.MemoryMiB<<20)); err != nil {
			return nil, err
		}
	}
	return patchSetupHeader(req.Kernel, p)
}

// rtmr1Events are the boot measurements: the kernel's Authenticode digest
// and the boot-manager and Exit Boot Services actions.
func rtmr1Events(req RTMRRequest) ([]TDXEvent, error) {
	kernel, err := measuredKernel(req)
	if err != nil {
		return nil, err
	}
	pe, err := ParsePE(kernel)
	if err != nil {
		return nil, err
	}
	var evs []TDXEvent
	add := func(name string, d Digest384) { evs = append(evs, TDXEvent{RTMR: 1, Event: name, Digest: d}) }
	add("kernel (Authenticode)", pe.Authenticode())
	add(evCallingEFIApp, sha384([]byte(evCallingEFIApp)))
	if req.Profile != EDK2Stable202408 {
		add("separator", separatorDigest)
	}
	add(evExitBSInvoke, sha384([]byte(evExitBSInvoke)))
	add(evExitBSSuccess, sha384([]byte(evExitBSSuccess)))
	return evs, nil
}

// rtmr2Events are the kernel command line edk2 passes (UTF-16LE with NUL)
// and the initrd's SHA-384.
func rtmr2Events(req RTMRRequest) ([]TDXEvent, error) {
	if b := req.FwCfg; b != nil {
		req.Cmdline, req.Initrd = b.Cmdline, b.Initrd
	}
	evs := []TDXEvent{{RTMR: 2, Event: "kernel command line", Digest: sha384(utf16NUL(req.Profile.LoadOptions(req.Cmdline, len(req.Initrd) > 0)))}}
	if len(req.Initrd) > 0 {
		evs = append(evs, TDXEvent{RTMR: 2, Event: "initrd", Digest: sha384(req.Initrd)})
	}
	return evs, nil
}

// checkSecureBoot refuses a variable store that enrolls a Platform Key:
// with PK set the firmware enforces Secure Boot, and an unsigned or
// distribution-signed kernel loaded from fw_cfg is refused (edk2 does not
// fall back to the legacy loader on a security violation), so no RTMR
// value exists to compare against.
func checkSecureBoot(cfv []byte) error {
	const fvHdrLen, storeHdr, varHdr = 0x30, 28, 60
	if len(cfv) < fvHdrLen+2 || string(cfv[0x28:0x2c]) != "_FVH" {
		return fmt.Errorf("CFV: no firmware volume header (\"_FVH\" at offset 0x28)")
	}
	p := int(binary.LittleEndian.Uint16(cfv[fvHdrLen:])) + storeHdr
	for p >= 0 && p+varHdr <= len(cfv) && binary.LittleEndian.Uint16(cfv[p:]) == 0x55aa {
		state := cfv[p+2]
		nameSize := int(binary.LittleEndian.Uint32(cfv[p+36:]))
		dataSize := int(binary.LittleEndian.Uint32(cfv[p+40:]))
		if nameSize < 0 || dataSize < 0 || p+varHdr+nameSize+dataSize > len(cfv) {
			return fmt.Errorf("CFV: variable at offset %#x runs past the end of the variable store", p)
		}
		name := cfv[p+varHdr : p+varHdr+nameSize]
		if state == 0x3f && dataSize > 0 && string(name) == "P\x00K\x00\x00\x00" {
			return fmt.Errorf("firmware enrolls a Platform Key (PK, %d bytes, in its variable store): it enforces Secure Boot and refuses a direct-boot kernel not signed by its db keys, so no RTMR value exists; use a TDVF build without enrolled keys (e.g. OVMF.inteltdx.fd rather than .ms.fd)", dataSize)
		}
		p = (p + varHdr + nameSize + dataSize + 3) &^ 3
	}
	return nil
}
