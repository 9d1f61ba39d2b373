package refvalues

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/goldenfile"
)

// The TPM oracle: the firmware itself, booted under QEMU with a software
// TPM, measures the same QEMU's ACPI and SMBIOS tables, the kernel and the
// LoadOptions the kernel's EFI stub receives, and the kernel hands its
// TCG2 log to the guest; berth's RTMR events for the same QEMU arguments
// must be those events (testdata/tpmlog/README.md).
const (
	oracleCmdline = "console=ttyS0 panic=-1"
	oracleMemMiB  = 2048
)

// oracleFirmware is a firmware the oracle boots, the profile `--edk2 auto`
// must choose for it, the PCIe base it programs, and the name of its
// committed logs (tpmlog/<name>-qemuN.log).
type oracleFirmware struct {
	file     string
	profile  EDK2Profile
	pciExBar uint32
	name     string
}

// oracleFirmwares: Debian sid's 2026.08 (edk2 2025.08+). Debian 12's
// 2022.11 is no oracle for a TD this way: booted with a TPM it measures
// SecureBoot with other data, no ACPI tables and, under QEMU 10, the
// patched kernel rather than etc/boot/kernel (all three differ from what
// calculate-tdx-mrs and its TD path have), while 2026.08's TPM path
// measures every shared event as its TD path does.
func oracleFirmwares() []oracleFirmware {
	return []oracleFirmware{
		{"OVMF.sid-2026.08.fd", EDK2Stable202508, pciExBarFrom202305, "sid-2026.08"},
	}
}

// tdvfPCRToRTMR is TDVF's mapping of PCRs to RTMRs (edk2
// OvmfPkg/Library/TdxMeasurementLib TdxMeasurementMapPcrToMrIndex: PCR 0
// to MRTD, 1 and 7 to RTMR0, 2-6 to RTMR1, 8-15 to RTMR2); -1 for MRTD and
// PCRs a TD does not have.
func tdvfPCRToRTMR(pcr uint32) int {
	switch {
	case pcr == 1 || pcr == 7:
		return 0
	case pcr >= 2 && pcr <= 6:
		return 1
	case pcr >= 8 && pcr <= 15:
		return 2
	}
	return -1
}

// swtpm starts a software TPM for one QEMU run and returns the QEMU
// arguments that attach it as a TIS device.
func swtpm(t *testing.T) []string {
	t.Helper()
	testkit.NeedsTools(t, "swtpm (Debian's)")
	bin, err := exec.LookPath("swtpm")
	if err != nil {
		t.Fatal("swtpm not found: .ci/tools.sh installs Debian's swtpm")
	}
	dir, err := os.MkdirTemp("", "berth-swtpm")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "ctrl")
	cmd := exec.Command(bin, "socket", "--tpm2", "--tpmstate", "dir="+dir, "--ctrl", "type=unixio,path="+sock)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("swtpm did not create %s within 10 s: %s", sock, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return []string{"-chardev", "socket,id=chrtpm,path=" + sock, "-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0"}
}

// oracleInitrd builds testdata/tpmlog/init statically and packs it as the
// /init of a newc cpio archive, with /dev/console for its output and the
// /sys mount point.
func oracleInitrd(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "init")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", bin, "./testdata/tpmlog/init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the oracle's init: %v\n%s", err, out)
	}
	init, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	entry := func(ino int, name string, mode uint32, rdev [2]int, data []byte) {
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name)+1, 0)
		b.WriteString(name + "\x00")
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
		b.Write(data)
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	entry(1, "dev", 0o40755, [2]int{}, nil)
	entry(2, "dev/console", 0o20600, [2]int{5, 1}, nil)
	entry(3, "sys", 0o40755, [2]int{}, nil)
	entry(4, "init", 0o100755, [2]int{}, init)
	entry(5, "TRAILER!!!", 0, [2]int{}, nil)
	return b.Bytes()
}

// bootTPMLog boots the machine with the firmware, kernel, initrd and
// command line and a fresh software TPM, and returns the TCG2 log the
// guest's init printed.
func bootTPMLog(t *testing.T, m QEMUMachine, kernel, initrd, serial string) []byte {
	t.Helper()
	var args []string
	for _, a := range m.Args() {
		switch a {
		case "-S", "-qtest", "stdio", "-qtest-log", "/dev/null":
			continue
		}
		args = append(args, a)
	}
	args = append(args, swtpm(t)...)
	args = append(args, "-kernel", kernel, "-initrd", initrd, "-append", oracleCmdline, "-no-reboot")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, m.Binary, args...).CombinedOutput(); err != nil {
		b, _ := os.ReadFile(serial)
		t.Fatalf("%s %s: %v\n%s\nserial: %s", m.Binary, strings.Join(args, " "), err, out, b)
	}
	out, err := os.ReadFile(serial)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(out, []byte("BERTH-LOG-BEGIN"))
	body, _, ok2 := bytes.Cut(rest, []byte("BERTH-LOG-END"))
	if !ok || !ok2 {
		t.Fatalf("the guest printed no event log; serial output:\n%s", out)
	}
	log, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(body)), ""))
	if err != nil {
		t.Fatalf("the guest's event log: %v", err)
	}
	return log
}

// oracleEvent names a TPM log event as berth names its RTMR events; ""
// for the events only a TPM boot has (PCR 0, the separators a TPM boot
// puts into PCR 0-6).
func oracleEvent(e LogEvent, acpi *[]string) (string, error) {
	switch {
	case e.MRIndex == 0:
		return "", nil
	case e.Type == evSeparator && e.MRIndex <= 6:
		return "", nil
	case e.Type == evSeparator:
		return "separator", nil
	case e.Type == evEFIBase+0x01 || e.Type == evEFIBase+0x02: // variable driver config, variable boot
		if len(e.Data) < 32 {
			return "", fmt.Errorf("event %d: %d bytes of UEFI_VARIABLE_DATA", e.Seq, len(e.Data))
		}
		n := int(binary.LittleEndian.Uint64(e.Data[16:]))
		if 32+2*n > len(e.Data) {
			return "", fmt.Errorf("event %d: variable name of %d characters runs past the event", e.Seq, n)
		}
		u := make([]uint16, n)
		for i := range u {
			u[i] = binary.LittleEndian.Uint16(e.Data[32+2*i:])
		}
		return string(utf16.Decode(u)), nil
	case e.Type == 0x0a && string(e.Data) == "ACPI DATA":
		if len(*acpi) == 0 {
			return "", fmt.Errorf("event %d: more ACPI DATA events than QEMU has ACPI blobs", e.Seq)
		}
		name := (*acpi)[0]
		*acpi = (*acpi)[1:]
		return name, nil
	case e.Type == evEFIBase+0x09 && len(e.Data) >= 24 && bytes.Equal(e.Data[8:24], mustGUIDBytes("eb9d2d31-2d88-11d3-9a16-0090273fc14d")):
		return "SMBIOS tables", nil
	case e.Type == evEFIBase+0x03:
		return "kernel (Authenticode)", nil
	case e.Type == evEFIBase+0x07:
		return string(e.Data), nil
	case e.Type == evEventTag && bytes.Contains(e.Data, []byte("LOADED_IMAGE::LoadOptions\x00")):
		return "kernel command line", nil
	case e.Type == evEventTag && bytes.Contains(e.Data, []byte("Linux initrd\x00")):
		return "initrd", nil
	}
	return "", fmt.Errorf("event %d: PCR %d %s %q is not an event berth knows", e.Seq, e.MRIndex, EventTypeName(e.Type), printable(e.Data))
}

// tdOnly says whether berth's event is measured in a TD only: the TD HOB
// and CFV (a TPM boot measures firmware blobs into PCR 0 instead), the
// fw_cfg items (measured only when TdIsEnabled()), and the one separator
// TdTcg2Dxe puts into RTMR1 for PCR 2-6.
func tdOnly(e TDXEvent) bool {
	return e.Event == "TD HOB" || e.Event == "Configuration FV" || strings.HasPrefix(e.Event, "QEMU FW CFG ") ||
		(e.RTMR == 1 && e.Event == "separator")
}

// compareTPMOracle compares the oracle's log with berth's events for the
// same QEMU: per RTMR, the events both boots measure must be the same
// events, in the same order, with the same SHA-384 digests.
func compareTPMOracle(t *testing.T, raw []byte, want *RTMRs, acpi *ACPIBlobs) {
	t.Helper()
	l, err := ParseTPMEventLog(raw)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{tableLoaderFile}
	for _, f := range acpi.Files {
		names = append(names, f.Name)
	}
	var got [3][]TDXEvent
	for _, e := range l.Events {
		if e.Type == evNoAction {
			continue
		}
		name, err := oracleEvent(e, &names)
		if err != nil {
			t.Fatal(err)
		}
		if name == "" {
			continue
		}
		r := tdvfPCRToRTMR(e.MRIndex)
		if r < 0 {
			t.Fatalf("event %d (%s) is in PCR %d, which a TD does not have", e.Seq, name, e.MRIndex)
		}
		got[r] = append(got[r], TDXEvent{RTMR: r, Event: name, Digest: e.SHA384})
	}
	var exp [3][]TDXEvent
	for _, e := range want.Events {
		if !tdOnly(e) {
			exp[e.RTMR] = append(exp[e.RTMR], e)
		}
	}
	for r := range 3 {
		for i := range max(len(got[r]), len(exp[r])) {
			switch {
			case i >= len(got[r]):
				t.Errorf("RTMR%d event %d: berth has %s, the firmware measured nothing more", r, i, exp[r][i].Event)
			case i >= len(exp[r]):
				t.Errorf("RTMR%d event %d: the firmware measured %s %s, berth has nothing more", r, i, got[r][i].Event, got[r][i].Digest)
			case got[r][i] != exp[r][i]:
				t.Errorf("RTMR%d event %d: the firmware measured %s %s, berth has %s %s", r, i, got[r][i].Event, got[r][i].Digest, exp[r][i].Event, exp[r][i].Digest)
			}
		}
	}
}

// oracleRequest computes berth's events for the oracle's QEMU arguments:
// the ACPI and SMBIOS tables and the boot items read from the same QEMU,
// with the TPM device attached as in the boot.
func oracleRequest(t *testing.T, of oracleFirmware, m QEMUMachine, major int, kernel, initrd []byte) (*RTMRs, *ACPIBlobs) {
	t.Helper()
	fw := readTestdata(t, of.file)
	tdvf, err := ParseTDVF(fw)
	if err != nil {
		t.Fatal(err)
	}
	profile, why, err := resolveEDK2(EDK2Auto, fw)
	if err != nil {
		t.Fatal(err)
	}
	if profile != of.profile {
		t.Fatalf("--edk2 auto chose profile %d for %s (%s), want %d", profile, of.file, why, of.profile)
	}
	dm := m
	dm.Extra = append(append([]string{}, m.Extra...), swtpm(t)...)
	acpi, err := DumpACPIBlobs(context.Background(), dm)
	if err != nil {
		t.Fatal(err)
	}
	bm := m
	bm.Extra = append(append([]string{}, m.Extra...), swtpm(t)...)
	boot, err := DumpBootBlobs(context.Background(), bm, kernel, initrd, oracleCmdline)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := ComputeRTMRs(RTMRRequest{Firmware: tdvf, MemoryMiB: m.MemoryMiB, ACPI: acpi, Kernel: kernel, Initrd: initrd,
		Cmdline: oracleCmdline, QEMUMajor: major, Profile: profile, FwCfg: boot})
	if err != nil {
		t.Fatal(err)
	}
	return rt, acpi
}

// TestTPMOracle boots Debian sid's OVMF 2026.08 (edk2-stable202508 and
// later) under QEMU 7.2 and 10 with a software TPM and compares the
// firmware's own event log, event by event, with berth's RTMR events for
// the same QEMU arguments. It also checks the boot
// against the log committed in testdata/tpmlog (rewritten with -update).
func TestTPMOracle(t *testing.T) {
	kernel := debianKernel(t)
	kpath := os.Getenv("BERTH_TDX_KERNEL")
	for _, c := range oracleCases() {
		of, major := c.fw, c.major
		t.Run(fmt.Sprintf("%s/qemu%d", of.name, major), func(t *testing.T) {
			q := testQEMU(t, major)
			initrd := oracleInitrd(t)
			ipath := filepath.Join(t.TempDir(), "initrd.cpio")
			if err := os.WriteFile(ipath, initrd, 0o644); err != nil {
				t.Fatal(err)
			}
			m := KataTDXMachine(q, oracleMemMiB, 1, 1)
			// The serial port is in the ACPI tables: the dumps have it
			// too.
			serial := filepath.Join(t.TempDir(), "serial.log")
			m.Extra = []string{"-bios", filepath.Join("testdata", of.file), "-serial", "file:" + serial}
			var err error
			if m.PCIExBar, err = firmwarePCIExBar(readTestdata(t, of.file), EDK2Auto); err != nil || m.PCIExBar != of.pciExBar {
				t.Fatalf("%s's PCIe base: %#x %v, want %#x", of.file, m.PCIExBar, err, of.pciExBar)
			}
			raw := bootTPMLog(t, m, kpath, ipath, serial)
			vec := filepath.Join("testdata", "tpmlog", fmt.Sprintf("%s-qemu%d.log", of.name, major))
			if goldenfile.Update() {
				if err := os.WriteFile(vec, raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, acpi := oracleRequest(t, of, m, major, kernel, initrd)
			compareTPMOracle(t, raw, want, acpi)
			// The committed log differs from a fresh boot in the initrd
			// only (its init is built by the Go toolchain at hand).
			committed, err := os.ReadFile(vec)
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := ParseTPMEventLog(raw)
			if err != nil {
				t.Fatal(err)
			}
			old, err := ParseTPMEventLog(committed)
			if err != nil {
				t.Fatalf("%s: %v", vec, err)
			}
			if len(old.Events) != len(fresh.Events) {
				t.Fatalf("%s has %d events, the boot measured %d", vec, len(old.Events), len(fresh.Events))
			}
			for i, e := range fresh.Events {
				o := old.Events[i]
				initrdEv := e.Type == evEventTag && bytes.Contains(e.Data, []byte("Linux initrd"))
				if o.MRIndex != e.MRIndex || o.Type != e.Type || (o.SHA384 != e.SHA384 && !initrdEv) {
					t.Errorf("%s event %d: PCR %d %s %s, the boot measured PCR %d %s %s", vec, i, o.MRIndex, EventTypeName(o.Type), o.SHA384, e.MRIndex, EventTypeName(e.Type), e.SHA384)
				}
			}
		})
	}
}

// oracleCase is one boot of TestTPMOracle.
type oracleCase struct {
	fw    oracleFirmware
	major int
}

func oracleCases() []oracleCase {
	var cs []oracleCase
	for _, fw := range oracleFirmwares() {
		for _, major := range []int{7, 10} {
			cs = append(cs, oracleCase{fw, major})
		}
	}
	return cs
}

// TestTPMOracleVectors checks, without tools, what the committed oracle
// logs say on their own: the LoadOptions edk2 202508+ hands the kernel
// put "initrd=initrd " first, as berth's EDK2Stable202508 profile has it,
// and the older releases put " initrd=initrd" last.
func TestTPMOracleVectors(t *testing.T) {
	for _, c := range oracleCases() {
		major := c.major
		raw := readTestdata(t, fmt.Sprintf("tpmlog/%s-qemu%d.log", c.fw.name, major))
		l, err := ParseTPMEventLog(raw)
		if err != nil {
			t.Fatal(err)
		}
		var got []Digest384
		for _, e := range l.Events {
			if e.Type == evEventTag && bytes.Contains(e.Data, []byte("LOADED_IMAGE::LoadOptions\x00")) {
				got = append(got, e.SHA384)
			}
		}
		want := sha384(utf16NUL(c.fw.profile.LoadOptions(oracleCmdline, true)))
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s qemu%d: LoadOptions events %v, want one of %s", c.fw.name, major, got, want)
		}
		if old := sha384(utf16NUL(EDK2Default.LoadOptions(oracleCmdline, true))); old == want {
			t.Error("the two LoadOptions orders digest the same")
		}
	}
}
