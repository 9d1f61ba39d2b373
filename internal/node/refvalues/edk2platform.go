package refvalues

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
)

// PlatformBlobs are the fw_cfg data edk2 from edk2-stable202505 on
// measures into RTMR0 besides the ACPI tables: the fw_cfg items it caches
// and measures, and the SMBIOS tables QEMU hands over.
type PlatformBlobs struct {
	// FwCfg are the measured fw_cfg items QEMU offers, in the order edk2
	// measures them (edk2FwCfgMeasured).
	FwCfg []FwCfgFile `json:"fwcfg"`
	// SMBIOSTables is etc/smbios/smbios-tables: QEMU's SMBIOS structures,
	// ending with its type 127; nil when QEMU offers none.
	SMBIOSTables []byte `json:"smbiosTables"`
	// SMBIOSAnchor is etc/smbios/smbios-anchor: the entry point QEMU
	// would publish, whose version edk2 adopts.
	SMBIOSAnchor []byte `json:"smbiosAnchor"`
}

// edk2FwCfgItem is one entry of edk2's list of fw_cfg items to cache
// (OvmfPkg/Library/QemuFwCfgLib/QemuFwCfgCacheInit.c mCacheFwCfgList, the
// entries with NeedMeasure TRUE). item is the fixed selector of an item
// that is not a file; size, when not 0, is the only size edk2 accepts
// (another size is neither cached nor measured).
type edk2FwCfgItem struct {
	name string
	item uint16
	size uint32
}

// fwCfgBootMenu is QEMU's FW_CFG_BOOT_MENU item: a 16-bit flag, present on
// every machine.
const fwCfgBootMenu = 0x0e

// edk2FwCfgMeasured lists, in edk2's order, the fw_cfg items edk2 measures
// in a TD as EV_PLATFORM_CONFIG_FLAGS events into PCR 1 (RTMR0), the
// digest over the item's bytes: from PEI on OvmfPkgX64 (PlatformPei,
// commit 81c2c92074), from the PEI-less startup on IntelTdx (2eac71a1ee),
// after the TD HOB and CFV. It measures only when TdIsEnabled(): a
// TPM boot of the same firmware caches them without measuring.
func edk2FwCfgMeasured() []edk2FwCfgItem {
	return []edk2FwCfgItem{
		{name: "etc/extra-pci-roots", size: 8},
		{name: "BootMenu", item: fwCfgBootMenu, size: 2},
		{name: "etc/boot-menu-wait", size: 2},
		{name: "etc/reserved-memory-end", size: 8},
		{name: "opt/ovmf/X-PciMmio64Mb"},
		{name: "bootorder"},
	}
}

// SMBIOS fw_cfg files (QEMU hw/smbios/smbios.c, hw/i386/fw_cfg.c).
const (
	smbiosTablesFile = "etc/smbios/smbios-tables"
	smbiosAnchorFile = "etc/smbios/smbios-anchor"
	// maxSMBIOSSize bounds the SMBIOS files: QEMU's tables are a few KiB,
	// and a 2.x entry point cannot describe more than 64 KiB.
	maxSMBIOSSize = 1 << 20
)

// readPlatform reads the fw_cfg items edk2 measures and the SMBIOS files,
// with files the fw_cfg directory.
func (q *qtest) readPlatform(files map[string]fwCfgEntry) (*PlatformBlobs, error) {
	p := &PlatformBlobs{}
	for _, it := range edk2FwCfgMeasured() {
		sel, size := it.item, it.size
		if it.item == 0 {
			e, ok := files[it.name]
			if !ok || e.size == 0 || (it.size != 0 && e.size != it.size) {
				continue // edk2 skips it too
			}
			if e.size > maxFwCfgFileSize {
				return nil, fmt.Errorf("fw_cfg file %q has %d bytes", it.name, e.size)
			}
			sel, size = e.sel, e.size
		}
		d, err := q.read(sel, size)
		if err != nil {
			return nil, fmt.Errorf("fw_cfg %s: %w", it.name, err)
		}
		p.FwCfg = append(p.FwCfg, FwCfgFile{Name: it.name, Data: d})
	}
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{smbiosTablesFile, &p.SMBIOSTables}, {smbiosAnchorFile, &p.SMBIOSAnchor}} {
		e, ok := files[f.name]
		if !ok {
			continue
		}
		if e.size > maxSMBIOSSize {
			return nil, fmt.Errorf("fw_cfg file %q has %d bytes, more than SMBIOS tables hold", f.name, e.size)
		}
		d, err := q.read(e.sel, e.size)
		if err != nil {
			return nil, fmt.Errorf("fw_cfg %s: %w", f.name, err)
		}
		*f.dst = d
	}
	return p, nil
}

// smbiosMaxHandle is the largest handle an SMBIOS version allows (edk2
// MdeModulePkg/Universal/SmbiosDxe GetMaxSmbiosHandle): edk2 gives its
// end-of-table structure this handle.
func smbiosMaxHandle(anchor []byte) (uint16, error) {
	var major, minor byte
	switch {
	case len(anchor) >= 24 && string(anchor[:5]) == "_SM3_":
		major, minor = anchor[7], anchor[8]
	case len(anchor) >= 31 && string(anchor[:4]) == "_SM_":
		major, minor = anchor[6], anchor[7]
	default:
		return 0, fmt.Errorf("%s: %d bytes without a \"_SM_\" or \"_SM3_\" entry point", smbiosAnchorFile, len(anchor))
	}
	if major == 2 && minor == 0 {
		return 0xfffe, nil
	}
	return 0xfeff, nil
}

// smbiosStructSize is the length of the structure at b: its formatted
// area and its string set up to the double NUL.
func smbiosStructSize(b []byte, off int) (int, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("%s: structure at offset %#x: %d bytes left, a header has 4", smbiosTablesFile, off, len(b))
	}
	n := int(b[1])
	if n < 4 || n > len(b) {
		return 0, fmt.Errorf("%s: structure of type %d at offset %#x: length %d, expected 4 to %d", smbiosTablesFile, b[0], off, n, len(b))
	}
	for i := n; i+1 < len(b); i++ {
		if b[i] == 0 && b[i+1] == 0 {
			return i + 2, nil
		}
	}
	return 0, fmt.Errorf("%s: structure of type %d at offset %#x: strings do not end in a double NUL", smbiosTablesFile, b[0], off)
}

// smbiosFilter is one field SmbiosMeasurementDxe blanks before measuring:
// its offset and size in the formatted area; a string field also has its
// string overwritten with spaces.
type smbiosFilter struct {
	off, size int
	str       bool
}

// smbiosFilters are edk2's per-type filters
// (MdeModulePkg/Universal/SmbiosMeasurementDxe mSmbiosFilterStandardTableBlackList):
// a type listed with no fields has its whole formatted area after the
// header zeroed; types from 128 (OEM) are zeroed too.
func smbiosFilters(typ byte) ([]smbiosFilter, bool) {
	s, n := func(off, size int) smbiosFilter { return smbiosFilter{off, size, true} }, func(off, size int) smbiosFilter { return smbiosFilter{off, size, false} }
	switch typ {
	case 1: // serial number, UUID, wake-up type
		return []smbiosFilter{s(7, 1), n(8, 16), n(24, 1)}, true
	case 2: // serial number, location in chassis
		return []smbiosFilter{s(7, 1), s(10, 1)}, true
	case 3: // serial number, asset tag
		return []smbiosFilter{s(7, 1), s(8, 1)}, true
	case 4: // serial number, asset tag, part number, core/thread counts, voltage, current speed
		return []smbiosFilter{s(0x20, 1), s(0x21, 1), s(0x22, 1), n(0x23, 1), n(0x24, 1), n(0x25, 1),
			n(0x2a, 2), n(0x2c, 2), n(0x2e, 2), n(0x11, 1), n(0x16, 2)}, true
	case 17: // serial number, asset tag, part number
		return []smbiosFilter{s(0x18, 1), s(0x19, 1), s(0x1a, 1)}, true
	case 22: // serial number, SBDS serial number, SBDS manufacture date
		return []smbiosFilter{s(7, 1), n(0x10, 2), n(0x12, 2)}, true
	case 23: // reset count
		return []smbiosFilter{n(5, 2)}, true
	case 27: // nominal speed
		return []smbiosFilter{n(0x0c, 2)}, true
	case 39: // serial number, asset tag number, model part number
		return []smbiosFilter{s(8, 1), s(9, 1), s(0x0a, 1)}, true
	case 11, 15, 18, 31, 33:
		return nil, true
	}
	return nil, typ >= 128
}

// SMBIOSMeasured returns the SMBIOS structure table edk2 measures: QEMU's
// structures as OVMF's SmbiosPlatformDxe adds them (all up to QEMU's type
// 127, in QEMU's order and with QEMU's handles), edk2's own end-of-table
// structure (SmbiosDxe), then SmbiosMeasurementDxe's filter applied.
//
// When QEMU provides no type 0, OVMF adds type0 (FirmwareSMBIOSType0) after
// QEMU's structures, with the lowest handle QEMU's do not use.
func (p *PlatformBlobs) SMBIOSMeasured(type0 func() ([]byte, error)) ([]byte, error) {
	if p == nil || p.SMBIOSTables == nil {
		return nil, fmt.Errorf("QEMU offers no %s: OVMF would build SMBIOS tables of its own, which berth does not model", smbiosTablesFile)
	}
	maxHandle, err := smbiosMaxHandle(p.SMBIOSAnchor)
	if err != nil {
		return nil, err
	}
	b := p.SMBIOSTables
	out := make([]byte, 0, len(b)+6)
	has0 := false
	handles := map[uint16]bool{}
	for off := 0; ; {
		if off >= len(b) {
			return nil, fmt.Errorf("%s: %d bytes without an end-of-table structure (type 127)", smbiosTablesFile, len(b))
		}
		n, err := smbiosStructSize(b[off:], off)
		if err != nil {
			return nil, err
		}
		st := b[off : off+n]
		if st[0] == 127 {
			break
		}
		if st[0] == 0 {
			has0 = true
		}
		handles[binary.LittleEndian.Uint16(st[2:])] = true
		out = append(out, filterSMBIOS(st)...)
		off += n
	}
	if !has0 {
		t0, err := type0()
		if err != nil {
			return nil, fmt.Errorf("QEMU's SMBIOS tables have no type 0, which OVMF adds from its build: %w", err)
		}
		t0 = append([]byte{}, t0...)
		h := uint16(0)
		for handles[h] {
			h++
		}
		binary.LittleEndian.PutUint16(t0[2:], h)
		out = append(out, filterSMBIOS(t0)...)
	}
	out = append(out, 127, 4)
	out = binary.LittleEndian.AppendUint16(out, maxHandle)
	return append(out, 0, 0), nil
}

// filterSMBIOS returns a copy of one structure with the fields edk2 does
// not measure blanked.
func filterSMBIOS(st []byte) []byte {
	out := append([]byte{}, st...)
	filters, listed := smbiosFilters(out[0])
	if !listed {
		return out
	}
	formatted := int(out[1])
	if len(filters) == 0 {
		// The whole structure after the header, strings included
		// (ZeroMem of TableEntrySize - header).
		clear(out[4:])
		return out
	}
	for _, f := range filters {
		if formatted < f.off+f.size {
			continue // the field is not in this structure's version
		}
		if f.str && out[f.off] != 0 {
			if s, e, ok := smbiosString(out, formatted, int(out[f.off])); ok {
				for i := s; i < e; i++ {
					out[i] = ' '
				}
			}
		}
		clear(out[f.off : f.off+f.size])
	}
	return out
}

// smbiosString returns the bounds of string id (1-based) in a structure's
// string set.
func smbiosString(st []byte, formatted, id int) (int, int, bool) {
	p := formatted
	for i := 1; p < len(st) && st[p] != 0; i++ {
		e := p
		for e < len(st) && st[e] != 0 {
			e++
		}
		if i == id {
			return p, e, true
		}
		p = e + 1
	}
	return 0, 0, false
}

// ovmfType0Prefix starts OVMF's default SMBIOS type 0 template
// (OvmfPkg/SmbiosPlatformDxe mOvmfDefaultType0): type 0, its length, handle
// 0, string numbers 1 and 2, BIOS segment 0xe800, string 3.
var ovmfType0Prefix = []byte{0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0xe8, 0x03}

// dateString matches an SMBIOS BIOS release date, MM/DD/YYYY.
var dateString = regexp.MustCompile(`^[01][0-9]/[0-3][0-9]/[0-9]{4}$`)

// FirmwareSMBIOSType0 returns the SMBIOS type 0 (BIOS information)
// structure OVMF adds when QEMU provides none: its template as compiled
// into SmbiosPlatformDxe, followed by the build's firmware vendor,
// version and release date strings (fixed PCDs compiled into the same
// module, found beside the template). It refuses an image where these
// cannot be told apart rather than guess.
func FirmwareSMBIOSType0(image []byte) ([]byte, error) {
	v, err := ReadFirmwareVersion(image)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("the firmware carries no version string: its SMBIOS type 0 strings cannot be read")
	}
	vols, err := decompressedVolumes(image)
	if err != nil {
		return nil, err
	}
	var found [][]byte
	for _, vol := range vols {
		for off := 0; ; off++ {
			j := bytes.Index(vol[off:], ovmfType0Prefix[2:])
			if j < 0 {
				break
			}
			off += j
			p := off - 2
			if p < 0 || vol[p] != 0 || p+int(vol[p+1]) > len(vol) || vol[p+1] < 24 {
				continue
			}
			tmpl := vol[p : p+int(vol[p+1])]
			vendor, date, ok := type0Strings(vol[p+len(tmpl):], v.String)
			if !ok {
				continue
			}
			st := append([]byte{}, tmpl...)
			st = append(st, vendor...)
			st = append(st, 0)
			st = append(st, v.String...)
			st = append(st, 0)
			st = append(st, date...)
			found = append(found, append(st, 0, 0))
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("found %d SMBIOS type 0 templates with vendor, version and date strings in the firmware, expected 1: berth cannot tell the BIOS information OVMF adds", len(found))
	}
	return found[0], nil
}

// type0Strings reads the UTF-16 strings after the template (within 512
// bytes, NUL-padded): the firmware version, a MM/DD/YYYY date and one
// other string, the vendor.
func type0Strings(b []byte, version string) (vendor, date string, ok bool) {
	b = b[:min(len(b), 512)]
	var strs []string
	for i := 0; i+1 < len(b) && len(strs) < 3; {
		if b[i] == 0 && b[i+1] == 0 {
			i += 2
			continue
		}
		// A code alignment filler (66 90, 66 0f 1f 44 00 00, ...)
		// between the strings is skipped as non-text.
		j := i
		for j+1 < len(b) && b[j+1] == 0 && b[j] >= 0x20 && b[j] < 0x7f {
			j += 2
		}
		if j+1 < len(b) && j-i >= 6 && b[j] == 0 && b[j+1] == 0 {
			strs = append(strs, utf16ASCII(b[i:j]))
			i = j + 2
			continue
		}
		i = j + 1
		if i%2 != 0 {
			i++
		}
	}
	if len(strs) != 3 {
		return "", "", false
	}
	for _, s := range strs {
		switch {
		case s == version:
		case dateString.MatchString(s):
			date = s
		default:
			if vendor != "" {
				return "", "", false
			}
			vendor = s
		}
	}
	return vendor, date, vendor != "" && date != ""
}
