package refvalues

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// TestFirmwareSMBIOSType0 reads the BIOS information structure OVMF adds
// from the sid image: it must be the type 0 the booted firmware published
// (its DMI table, printed by the oracle's init), with handle 0.
func TestFirmwareSMBIOSType0(t *testing.T) {
	got, err := FirmwareSMBIOSType0(readTestdata(t, "OVMF.sid-2026.08.fd"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("001a0000010200e803000800000000000000001c0000ffff0000")
	want = append(want, "Debian distribution of EDK II\x002026.08+ds-2\x0009/26/2026\x00\x00"...)
	if !bytes.Equal(got, want) {
		t.Fatalf("type 0 %q\nwant %q", got, want)
	}
	for _, fw := range []string{"OVMF.debian12u2.fd"} {
		if _, err := FirmwareSMBIOSType0(readTestdata(t, fw)); err == nil || !strings.Contains(err.Error(), "no version string") {
			t.Errorf("%s: %v, want a refusal naming the missing version", fw, err)
		}
	}
}

// TestSMBIOSMeasuredOracle ties the committed QEMU SMBIOS tables to the
// committed oracle logs without tools: berth's measured table digests to
// the SMBIOS event the sid firmware logged under the same QEMU.
func TestSMBIOSMeasuredOracle(t *testing.T) {
	fw := readTestdata(t, "OVMF.sid-2026.08.fd")
	for _, major := range []int{7, 10} {
		p := &PlatformBlobs{
			SMBIOSTables: readTestdata(t, fmt.Sprintf("smbios-qemu%d/smbios-tables", major)),
			SMBIOSAnchor: readTestdata(t, fmt.Sprintf("smbios-qemu%d/smbios-anchor", major)),
		}
		table, err := p.SMBIOSMeasured(func() ([]byte, error) { return FirmwareSMBIOSType0(fw) })
		if err != nil {
			t.Fatal(err)
		}
		l, err := ParseTPMEventLog(readTestdata(t, fmt.Sprintf("tpmlog/sid-2026.08-qemu%d.log", major)))
		if err != nil {
			t.Fatal(err)
		}
		var logged []Digest384
		for _, e := range l.Events {
			if e.Type == evEFIBase+0x09 {
				logged = append(logged, e.SHA384)
			}
		}
		if want := sha384(table); len(logged) != 1 || logged[0] != want {
			t.Errorf("qemu%d: the firmware logged SMBIOS %v, berth measures %s", major, logged, want)
		}
	}
}

// TestSMBIOSFilter checks SmbiosMeasurementDxe's filter on structures
// built here: strings listed are overwritten with spaces and their
// number zeroed, fixed fields zeroed, listed-without-fields and OEM types
// zeroed after the header, fields past a short structure left alone.
func TestSMBIOSFilter(t *testing.T) {
	type1 := append([]byte{1, 27, 0x00, 0x01, 1, 2, 3, 4}, bytes.Repeat([]byte{0xaa}, 16)...)
	type1 = append(type1, 6, 0, 0)
	type1 = append(type1, "Maker\x00Product\x00v1\x00SERIAL\x00\x00"...)
	want1 := append([]byte{1, 27, 0x00, 0x01, 1, 2, 3, 0}, make([]byte, 16)...)
	want1 = append(want1, 0, 0, 0)
	want1 = append(want1, "Maker\x00Product\x00v1\x00      \x00\x00"...)
	short3 := append([]byte{3, 8, 0x00, 0x03, 1, 1, 0, 2}, "a\x00SN\x00\x00"...) // asset tag (offset 8) absent
	want3 := append([]byte{3, 8, 0x00, 0x03, 1, 1, 0, 0}, "a\x00  \x00\x00"...)
	type11 := append([]byte{11, 5, 0x00, 0x0b, 1}, "oem string\x00\x00"...)
	want11 := append([]byte{11, 5, 0, 0}, make([]byte, 1+len("oem string\x00\x00"))...)
	oem := append([]byte{0x80, 6, 0x00, 0x80, 9, 9}, 0, 0)
	wantOEM := []byte{0x80, 6, 0, 0x80, 0, 0, 0, 0}
	type32 := []byte{32, 11, 0x00, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	for _, tc := range []struct {
		name    string
		in, out []byte
	}{{"type 1", type1, want1}, {"short type 3", short3, want3}, {"type 11", type11, want11}, {"OEM", oem, wantOEM}, {"type 32 kept", type32, type32}} {
		got := filterSMBIOS(tc.in)
		// The header (type, length, handle) is kept: handles and types
		// are measured.
		if tc.name == "type 11" || tc.name == "OEM" {
			copy(tc.out[:4], tc.in[:4])
		}
		if !bytes.Equal(got, tc.out) {
			t.Errorf("%s: %q\nwant %q", tc.name, got, tc.out)
		}
	}
}

// TestSMBIOSMeasuredRefuses: malformed QEMU tables are refused with the
// offset and what was expected.
func TestSMBIOSMeasuredRefuses(t *testing.T) {
	anchor := readTestdata(t, "smbios-qemu7/smbios-anchor")
	none := func() ([]byte, error) { return nil, fmt.Errorf("no type 0 here") }
	for _, tc := range []struct {
		name   string
		p      *PlatformBlobs
		substr string
	}{
		{"no tables", &PlatformBlobs{}, "offers no etc/smbios/smbios-tables"},
		{"bad anchor", &PlatformBlobs{SMBIOSTables: []byte{127, 4, 0, 0, 0, 0}, SMBIOSAnchor: []byte("junk")}, "entry point"},
		{"short length", &PlatformBlobs{SMBIOSTables: []byte{1, 2, 0, 0, 0, 0}, SMBIOSAnchor: anchor}, "offset 0x0: length 2"},
		{"no double NUL", &PlatformBlobs{SMBIOSTables: []byte{1, 4, 0, 0, 'a'}, SMBIOSAnchor: anchor}, "double NUL"},
		{"no end", &PlatformBlobs{SMBIOSTables: []byte{0, 4, 0, 0, 0, 0}, SMBIOSAnchor: anchor}, "without an end-of-table"},
		{"no type 0, none in firmware", &PlatformBlobs{SMBIOSTables: []byte{127, 4, 0, 0, 0, 0}, SMBIOSAnchor: anchor}, "no type 0 here"},
	} {
		_, err := tc.p.SMBIOSMeasured(none)
		if err == nil || !strings.Contains(err.Error(), tc.substr) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.substr)
		}
	}
}

func TestLoadOptionsOrder(t *testing.T) {
	for _, tc := range []struct {
		p       EDK2Profile
		cmdline string
		initrd  bool
		want    string
	}{
		{EDK2Default, "console=hvc0", true, "console=hvc0 initrd=initrd"},
		{EDK2Stable202505, "console=hvc0", true, "console=hvc0 initrd=initrd"},
		{EDK2Stable202508, "console=hvc0", true, "initrd=initrd console=hvc0"},
		{EDK2Stable202508, "", true, "initrd=initrd "},
		{EDK2Stable202508, "console=hvc0", false, "console=hvc0"},
	} {
		if got := tc.p.LoadOptions(tc.cmdline, tc.initrd); got != tc.want {
			t.Errorf("profile %d %q initrd=%v: %q, want %q", tc.p, tc.cmdline, tc.initrd, got, tc.want)
		}
	}
	for s, want := range map[string]EDK2Profile{"202505": EDK2Stable202505, "edk2-stable202508": EDK2Stable202508} {
		if p, err := ParseEDK2Profile(s); err != nil || p != want {
			t.Errorf("%s: %d %v", s, p, err)
		}
	}
}

func TestFirmwarePCIExBar(t *testing.T) {
	for _, tc := range []struct {
		fw   string
		p    EDK2Profile
		want uint32
	}{
		{"OVMF.debian12u2.fd", EDK2Auto, pciExBarBefore202305},
		{"OVMF.debian12u2.fd", EDK2Default, pciExBarBefore202305},
		{"OVMF.debian12u2.fd", EDK2Stable202508, pciExBarFrom202305},
		{"OVMF.sid-2026.08.fd", EDK2Default, pciExBarFrom202305},
	} {
		got, err := firmwarePCIExBar(readTestdata(t, tc.fw), tc.p)
		if err != nil || got != tc.want {
			t.Errorf("%s profile %d: %#x %v, want %#x", tc.fw, tc.p, got, err, tc.want)
		}
	}
}

// FuzzSMBIOSMeasured feeds SMBIOS structure tables (seeds in
// testdata/fuzz: QEMU 7.2's and 10's tables, and cut ones) to the model:
// it never panics, and a table it accepts ends with edk2's end-of-table
// structure and keeps every structure's header.
func FuzzSMBIOSMeasured(f *testing.F) {
	anchor := readTestdata(f, "smbios-qemu7/smbios-anchor")
	type0 := func() ([]byte, error) {
		return []byte{0, 0x1a, 0, 0, 1, 2, 0, 0xe8, 3, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0x1c, 0, 0, 0xff, 0xff, 0, 0, 'v', 0, 'x', 0, 'd', 0, 0}, nil
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := (&PlatformBlobs{SMBIOSTables: b, SMBIOSAnchor: anchor}).SMBIOSMeasured(type0)
		if err != nil {
			return
		}
		if len(out) < 6 || !bytes.Equal(out[len(out)-6:], []byte{127, 4, 0xff, 0xfe, 0, 0}) {
			t.Fatalf("measured table does not end with edk2's end-of-table structure: % x", out[max(0, len(out)-6):])
		}
	})
}

// FuzzParseTPMEventLog: seeds are the oracle's two logs and a cut one.
func FuzzParseTPMEventLog(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		log, err := ParseTPMEventLog(b)
		if err != nil {
			return
		}
		for _, e := range log.Events {
			if e.MRIndex > 23 && e.Type != evNoAction {
				t.Fatalf("event %d: PCR %d accepted", e.Seq, e.MRIndex)
			}
		}
	})
}

// TestLikelyCauseEDK2202505 names the causes of the events edk2 2025.05+
// adds, not the generic ACPI one.
func TestLikelyCauseEDK2202505(t *testing.T) {
	for event, want := range map[string]string{
		"QEMU FW CFG BootMenu": "fw_cfg items",
		"SMBIOS tables":        "SMBIOS",
		"Boot0001":             "EFI Firmware Setup",
	} {
		if got := likelyCause(event); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to mention %q", event, got, want)
		}
	}
}
