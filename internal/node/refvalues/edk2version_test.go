package refvalues

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// lzmaVector is a stream liblzma (xz-utils, through CPython's lzma module,
// FORMAT_ALONE, LZMA1 preset 6, 64 KiB dictionary) made from 3608 bytes of
// text and byte ranges; its size field is set to 3608 as edk2 writes it.
const (
	lzmaVector       = "5d00000100ffffffffffffffff0031194aac211a7b2e36c5a1b52621dc23a64271b7a3d7e622a333c03d54f19709aa957b54a72b57fbea1fa7e87c2ac7380f2f1c34714113ff248e23a2b4538926a2359077ede64a4183063ff401e91050803baee5d3916dee6ce819146c43d1eaefb1962c6cca58bcfda59bef52addfe0b0ea728024b2671018a2c7dd6535a29195fdf72fe1d0038127ef8bac6b8bb15d8a9e54dfed4a4ca5ebd7c20c538a5dd72da5e100c37f731c3ee625265f44f0c3deeb27bc84276aef8aa1db3223a836b36835b23adbbe996449f3ad3170048590fd8da680eafab53373c5745d7370fa98968bc8f0258f40c326ece6f2b77c3a0ab519d4f60aa3efb5343c9cc814e21bb3ac076a022d55ae41f319646a9c7ea72a17cbf9c90e621eee65b7d9973abce2befdc5c5a876b51f75b6d86687a1c327042dc6cdca4f81c8b34bc0e857fff66ed7e0"
	lzmaVectorSHA256 = "5ceb7aa0047193fa662df85c8e6b67864ba082078bf851d17cac945608c2f71f"
)

func TestLZMADecode(t *testing.T) {
	src, err := hex.DecodeString(lzmaVector)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(src[5:], 3608)
	out, err := lzmaDecode(src, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if s := sha256.Sum256(out); hex.EncodeToString(s[:]) != lzmaVectorSHA256 {
		t.Errorf("decoded %d bytes with sha256 %x", len(out), s)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"header cut", src[:12], "header cut short"},
		{"cut short", src[:200], "cut short"},
		{"too large", func() []byte { b := append([]byte{}, src...); binary.LittleEndian.PutUint64(b[5:], 1<<40); return b }(), "more than"},
		{"bad properties", func() []byte { b := append([]byte{}, src...); b[0] = 225; return b }(), "properties"},
		{"first byte", func() []byte { b := append([]byte{}, src...); b[13] = 1; return b }(), "first byte"},
	} {
		if _, err := lzmaDecode(tc.in, 1<<20); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, expected %q", tc.name, err, tc.want)
		}
	}
}

// TestReadFirmwareVersion: the Debian 2026.08 builds carry their package
// version in the compressed DXE volume, Debian 12's carry none. The
// decompressed volumes' SHA-256 are CPython lzma's (liblzma) output for
// the same sections.
func TestReadFirmwareVersion(t *testing.T) {
	for _, tc := range []struct{ file, version string }{
		{"OVMF.amdsev.fd", "2026.08+ds-2"},
		{"OVMF.inteltdx.ms.fd", "2026.08+ds-2"},
		{"OVMF.sid-2026.08.fd", "2026.08+ds-2"},
		{"OVMF.debian12u1.fd", ""},
		{"OVMF.debian12u2.fd", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			img, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			v, err := ReadFirmwareVersion(img)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if v != nil {
				got = v.String
			}
			if got != tc.version {
				t.Fatalf("version %q, expected %q", got, tc.version)
			}
			p, why, err := resolveEDK2(EDK2Auto, img)
			switch {
			case tc.version == "" && (err != nil || p != EDK2Default || !strings.Contains(why, "no version string")):
				t.Errorf("no version: %v %v %q", p, err, why)
			case tc.version != "" && (err != nil || p != EDK2Stable202508 || !strings.Contains(why, "2026.08+ds-2") || !strings.Contains(why, "edk2-stable202608")):
				t.Errorf("2026.08: %v %v %q", p, err, why)
			}
		})
	}
}

func TestLZMAFirmwareVolumes(t *testing.T) {
	for _, tc := range []struct {
		file   string
		off    int
		sha256 string
	}{
		{"OVMF.amdsev.fd", 0x84090, "81ff3c9c98e1c6ffa24dd008c10b127c3fe6eb2c3f0d46b28620c89514ea1423"},
		{"OVMF.debian12u1.fd", 0x20090, "2a3bfc60a5a181d2b0a7498aeb5137a544b548532f6fd694299758a560152d51"},
		{"OVMF.inteltdx.ms.fd", 0x84090, "2f7efac154ac7a5b1f7d55813f2f055404fe0d75523c38aa97c36f5a0a6144a0"},
	} {
		img, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		size := int(img[tc.off]) | int(img[tc.off+1])<<8 | int(img[tc.off+2])<<16
		data := int(binary.LittleEndian.Uint16(img[tc.off+20:]))
		out, err := lzmaDecode(img[tc.off+data:tc.off+size], maxDecompressed)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if s := sha256.Sum256(out); hex.EncodeToString(s[:]) != tc.sha256 {
			t.Errorf("%s: decompressed volume sha256 %x, liblzma's is %s", tc.file, s, tc.sha256)
		}
	}
}

func TestEDK2ProfileOfVersion(t *testing.T) {
	for _, tc := range []struct {
		y, m int
		want EDK2Profile
		err  string
	}{
		{2022, 11, EDK2Default, ""}, {2024, 5, EDK2Default, ""}, {2024, 8, EDK2Stable202408, ""},
		{2024, 11, EDK2Default, ""}, {2025, 2, EDK2Default, ""},
		{2025, 5, EDK2Stable202505, ""}, {2025, 6, EDK2Stable202505, ""}, {2025, 8, EDK2Stable202508, ""},
		{2026, 8, EDK2Stable202508, ""},
	} {
		p, err := (&FirmwareVersion{String: "x", Year: tc.y, Month: tc.m}).EDK2Profile()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%d.%02d: %v, expected an error naming %s", tc.y, tc.m, err, tc.err)
			}
			continue
		}
		if err != nil || p != tc.want {
			t.Errorf("%d.%02d: %v %v", tc.y, tc.m, p, err)
		}
	}
}
