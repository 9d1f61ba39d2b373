package pciids

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
)

const excerpt = `# comment
#	vendor  vendor_name
0001  SafeNet (wrong ID)
1002  Advanced Micro Devices, Inc. [AMD/ATI]
	74a1  Aqua Vanjaram [Instinct MI300X]
10de  NVIDIA Corporation
	2330  GH100 [H100 SXM5 80GB]
		10de 16c1  H100 SXM5 80GB
	2331  GH100 [H100 PCIe]
8086  Intel Corporation
	1572  Ethernet Controller X710 for 10GbE SFP+
C 00  Unclassified device
	00  Non-VGA unclassified device
`

func TestResolve(t *testing.T) {
	got, err := Resolve(strings.NewReader(excerpt), []ID{
		{"10DE", "2330"}, {"10de", "2331"}, {"10de", "ffff"}, {"8086", "1572"}, {"abcd", "0001"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Names{
		Vendors: map[string]string{"10de": "NVIDIA Corporation", "8086": "Intel Corporation"},
		Devices: map[ID]string{
			{"10de", "2330"}: "GH100 [H100 SXM5 80GB]",
			{"10de", "2331"}: "GH100 [H100 PCIe]",
			{"8086", "1572"}: "Ethernet Controller X710 for 10GbE SFP+",
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Resolve = %+v, want %+v", got, want)
	}
}

// errReader fails if read past the data it was given: Resolve must stop
// once the last wanted vendor's block has ended.
type errReader struct{ r io.Reader }

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, errors.New("read past the end")
	}
	return n, err
}

func TestResolveStopsEarly(t *testing.T) {
	// Everything after the NVIDIA block is garbage that must not be parsed.
	text := "10de  NVIDIA Corporation\n\t2330  GH100\n1234  Next vendor\nnot a line at all\n"
	got, err := Resolve(&errReader{strings.NewReader(text)}, []ID{{"10de", "2330"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Device(ID{"10de", "2330"}) != "GH100" {
		t.Errorf("got %+v", got)
	}
}

func TestResolveErrors(t *testing.T) {
	for _, tt := range []struct{ text, want string }{
		{"10de  NVIDIA\n\tzz  bad device\n", "pci.ids:2: device line: expected 4 hex digits"},
		{"xyz\n", "pci.ids:1: vendor line: expected 4 hex digits"},
		{"10de  NVIDIA\n\t" + strings.Repeat("a", maxLine) + "\n", "pci.ids:2: bufio.Scanner: token too long"},
	} {
		_, err := Resolve(strings.NewReader(tt.text), []ID{{"10de", "2330"}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Resolve(%.20q) error %v, want %q", tt.text, err, tt.want)
		}
	}
	if n, err := Resolve(strings.NewReader("garbage"), nil); err != nil || len(n.Vendors) != 0 {
		t.Errorf("no ids wanted: %v %v", n, err)
	}
}

// BenchmarkResolveSystem resolves a typical server's ids against the
// distribution's full database.
func BenchmarkResolveSystem(b *testing.B) {
	data, err := os.ReadFile("/usr/share/misc/pci.ids")
	if err != nil {
		b.Fatalf("%v (install the Debian package pci.ids)", err)
	}
	want := systemIDs
	b.ReportAllocs()
	for b.Loop() {
		n, err := Resolve(bytes.NewReader(data), want)
		if err != nil || n.Vendor("8086") == "" {
			b.Fatal(n, err)
		}
	}
}

// systemIDs are a typical server's: NVIDIA, Intel, AMD, Mellanox, ASPEED.
var systemIDs = []ID{{"10de", "2330"}, {"8086", "1572"}, {"1022", "1483"}, {"15b3", "1019"}, {"1a03", "2000"}, {"8086", "0998"}}

// gpuServerIDs are an 8-GPU server's kinds of device: H100s and NVSwitches
// (too new for the distribution's pci.ids, as hosts' devices often are),
// ConnectX-7 and BlueField-3 NICs, Ice Lake root complex devices, an I210,
// AMD bridges, a Samsung NVMe drive, the BMC's VGA.
var gpuServerIDs = []ID{
	{"10de", "2330"}, {"10de", "22a3"}, {"15b3", "1021"}, {"15b3", "a2dc"}, {"8086", "09a2"},
	{"8086", "09a4"}, {"8086", "0b00"}, {"8086", "0998"}, {"8086", "1533"}, {"1022", "1480"},
	{"1022", "1482"}, {"1022", "1483"}, {"1022", "14ab"}, {"144d", "a80a"}, {"1a03", "2000"},
}

// vmIDs are a KVM guest's: virtio devices, the Q35 chipset, a QEMU root
// port and QEMU's standard VGA (not in pci.ids).
var vmIDs = []ID{{"1af4", "1041"}, {"1af4", "1042"}, {"1af4", "1050"}, {"8086", "29c0"}, {"8086", "2918"}, {"1b36", "000c"}, {"1234", "1111"}}

// BenchmarkResolveGPUServer resolves an 8-GPU server's ids: more devices
// of the big vendors.
func BenchmarkResolveGPUServer(b *testing.B) {
	benchmarkResolve(b, gpuServerIDs, true)
}

// BenchmarkResolveVM resolves a KVM guest's ids.
func BenchmarkResolveVM(b *testing.B) {
	benchmarkResolve(b, vmIDs, true)
}

// BenchmarkResolveNoAVX2 is BenchmarkResolveSystem without the vector
// scan, as on other architectures and old CPUs.
func BenchmarkResolveNoAVX2(b *testing.B) {
	benchmarkResolve(b, systemIDs, false)
}

func benchmarkResolve(b *testing.B, want []ID, vector bool) {
	data := readDB(b)
	if vector && !hasAVX2() {
		b.Skip("no AVX2")
	}
	b.ReportAllocs()
	for b.Loop() {
		var n Names
		var err error
		if vector {
			n, err = Resolve(bytes.NewReader(data), want)
		} else {
			n, err = resolve(bytes.NewReader(data), want, false)
		}
		if err != nil || n.Vendor("8086") == "" {
			b.Fatal(n, err)
		}
	}
}

func FuzzResolve(f *testing.F) {
	f.Add([]byte(excerpt), "10de", "2330")
	f.Add([]byte("10de  N\n\t2330  D\n\t\t10de 0001  S\nC 03  Display\n"), "10de", "2330")
	f.Fuzz(func(t *testing.T, data []byte, vendor, device string) {
		n, err := Resolve(bytes.NewReader(data), []ID{{vendor, device}})
		if err != nil {
			return
		}
		for v := range n.Vendors {
			if v != strings.ToLower(vendor) {
				t.Errorf("vendor %q not asked for", v)
			}
		}
		if len(n.Devices) > 1 {
			t.Errorf("more devices than asked for: %v", n.Devices)
		}
	})
}
