package refvalues

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
)

// FirmwareVersion is the version string an edk2 build carries
// (PcdFirmwareVersionString, which distributions set to their package
// version, e.g. Debian's "2026.08+ds-2"), and the edk2 release it names.
type FirmwareVersion struct {
	String string `json:"version"`
	// Year and Month are the edk2-stable release (edk2-stableYYYYMM).
	Year, Month int `json:"-"`
}

// guidLZMA is the GUID-defined section edk2 compresses firmware volumes
// into (MdePkg gLzmaCustomDecompressGuid).
var guidLZMA = mustGUIDBytes("ee4e5898-3914-4259-9d6e-dc7bd79403cf")

// maxDecompressed bounds one decompressed volume: OVMF's DXE volume is 12
// to 16 MiB.
const maxDecompressed = 64 << 20

// versionString matches a UTF-16LE version string "YYYY.MM" with an
// optional suffix (".01", "+ds-2", "-6ubuntu1"), NUL-terminated.
var versionString = regexp.MustCompile(`(?:[0-9]\x00){4}\.\x00[01]\x00[0-9]\x00(?:[\x21-\x7e]\x00){0,48}\x00\x00`)

// ReadFirmwareVersion finds the version string in the image's compressed
// volumes (the version lives in the DXE volume, which OVMF keeps LZMA
// compressed inside FVMAIN_COMPACT). It returns nil when the image
// carries none: upstream's default PcdFirmwareVersionString is empty, and
// Debian 12's builds leave it so.
func ReadFirmwareVersion(image []byte) (*FirmwareVersion, error) {
	vols, err := decompressedVolumes(image)
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	var first string
	for _, out := range vols {
		for _, loc := range versionString.FindAllIndex(out, -1) {
			if loc[0]%2 != 0 || loc[0] < 2 || out[loc[0]-1] != 0 || out[loc[0]-2] != 0 {
				continue // not the start of a string
			}
			s := utf16ASCII(out[loc[0] : loc[1]-2])
			if !found[s] {
				found[s] = true
				if first == "" {
					first = s
				}
			}
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("the firmware carries %d different version strings (%s, ...): cannot tell its edk2 release, give --edk2", len(found), first)
	}
	y, _ := strconv.Atoi(first[:4])
	m, _ := strconv.Atoi(first[5:7])
	return &FirmwareVersion{String: first, Year: y, Month: m}, nil
}

// decompressedVolumes returns the LZMA-compressed sections of the image
// (at most 8), decompressed.
func decompressedVolumes(image []byte) ([][]byte, error) {
	var vols [][]byte
	for i, n := 0, 0; n < 8; n++ {
		j := bytes.Index(image[i:], guidLZMA)
		if j < 0 {
			break
		}
		g := i + j
		i = g + len(guidLZMA)
		// EFI_GUID_DEFINED_SECTION: a 4-byte common header (24-bit
		// size, type 0x02), or the 8-byte one with size 0xffffff and a
		// 32-bit size, then the GUID, DataOffset and Attributes.
		hdr, size := g-4, 0
		if hdr < 0 || image[hdr+3] != 0x02 {
			hdr -= 4
			if hdr < 0 || image[hdr+3] != 0x02 {
				continue
			}
			size = int(binary.LittleEndian.Uint32(image[hdr+4:]))
		} else {
			size = int(image[hdr]) | int(image[hdr+1])<<8 | int(image[hdr+2])<<16
		}
		if g+20 > len(image) {
			continue
		}
		data := int(binary.LittleEndian.Uint16(image[g+16:]))
		if size <= data || hdr+size > len(image) || hdr+data > len(image) {
			continue
		}
		out, err := lzmaDecode(image[hdr+data:hdr+size], maxDecompressed)
		if err != nil {
			return nil, fmt.Errorf("compressed volume at offset %#x: %w", hdr, err)
		}
		vols = append(vols, out)
	}
	return vols, nil
}

// utf16ASCII decodes UTF-16LE text known to be ASCII.
func utf16ASCII(b []byte) string {
	out := make([]byte, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		out = append(out, b[i])
	}
	return string(out)
}

// EDK2Profile returns the event-log profile of the release the version
// names. From edk2-stable202505 on edk2 measures more into RTMR0 (the
// fw_cfg items it caches, commits fb56dc78ef, 81c2c92074, 2eac71a1ee; the
// SMBIOS tables, cd76265f1a), and from edk2-stable202508 it puts
// "initrd=initrd " before the command line (a2ac0fea49).
func (v *FirmwareVersion) EDK2Profile() (EDK2Profile, error) {
	ym := v.Year*100 + v.Month
	switch {
	case ym >= 202508:
		return EDK2Stable202508, nil
	case ym >= 202505:
		return EDK2Stable202505, nil
	case ym >= 202408 && ym < 202411:
		return EDK2Stable202408, nil
	}
	return EDK2Default, nil
}

// resolveEDK2 turns EDK2Auto into the profile of the firmware's release;
// the second result says how the profile was chosen.
func resolveEDK2(p EDK2Profile, image []byte) (EDK2Profile, string, error) {
	if p != EDK2Auto {
		return p, "given with --edk2", nil
	}
	v, err := ReadFirmwareVersion(image)
	if err != nil {
		return 0, "", err
	}
	if v == nil {
		return EDK2Default, "the firmware carries no version string: assumed edk2 2022.11-2025.02 (--edk2 to say otherwise)", nil
	}
	p, err = v.EDK2Profile()
	if err != nil {
		return 0, "", err
	}
	return p, fmt.Sprintf("firmware version %s (edk2-stable%d%02d)", v.String, v.Year, v.Month), nil
}

// PCIe MMCONFIG bases of OVMF on q35 (PcdPciExpressBaseAddress): edk2
// commit 82c1aa87f9 ("OvmfPkg/PlatformInitLib: move mmconfig to
// 0xe0000000", first in edk2-stable202305) moved it from 0xb0000000.
const (
	pciExBarBefore202305 = 0xb0000000
	pciExBarFrom202305   = 0xe0000000
)

// FirmwarePCIExBar returns the PCIe MMCONFIG base the firmware programs,
// which QEMU's ACPI tables describe (MCFG, the DSDT's PCI resources): by
// the release the image carries, else by the profile (the default profile
// is edk2 2022.11, which predates the move).
func FirmwarePCIExBar(fw Component, p EDK2Profile) (uint32, error) {
	image, _, err := fw.readAll("firmware", maxFirmwareSize)
	if err != nil {
		return 0, err
	}
	return firmwarePCIExBar(image, p)
}

func firmwarePCIExBar(image []byte, p EDK2Profile) (uint32, error) {
	v, err := ReadFirmwareVersion(image)
	if err != nil {
		return 0, err
	}
	switch {
	case v != nil && v.Year*100+v.Month >= 202305:
		return pciExBarFrom202305, nil
	case v != nil, p == EDK2Default, p == EDK2Auto:
		return pciExBarBefore202305, nil
	}
	return pciExBarFrom202305, nil
}
