package cli

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit"
)

// TestRefvaluesTDXRTMR runs berth refvalues for a TDX direct boot with the
// real QEMU (stopped, read through qtest) and the Debian kernel the refvalues tests
// use; the RTMR values are those of internal/node/refvalues's vectors
// (RTMR1 and RTMR2 reproduce calculate-tdx-mrs, see its SOURCES.md).
func TestRefvaluesTDXRTMR(t *testing.T) {
	testkit.NeedsTools(t, "QEMU and the Debian kernel (BERTH_TDX_KERNEL)")
	kernel := os.Getenv("BERTH_TDX_KERNEL")
	if kernel == "" {
		t.Fatal("BERTH_TDX_KERNEL is not set: run `. .ci/tools.env` (tools.sh fetches the Debian kernel)")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal("qemu-system-x86_64 not found: .ci/tools.sh installs qemu-system-x86")
	}
	qemu10 := os.Getenv("BERTH_QEMU10")
	if qemu10 == "" {
		t.Fatal("BERTH_QEMU10 is not set: run `. .ci/tools.env` (tools.sh runs .ci/qemu10.sh)")
	}
	cache := t.TempDir()
	base := []string{"refvalues", "--platform", "kata-qemu-tdx", "--qemu", qemu}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
		noCache  bool
	}{
		{
			name: "debian firmware 2048 MiB",
			args: []string{"--firmware", rvData + "OVMF.debian12u2.fd", "--kernel", kernel, "--cmdline", "console=hvc0", "--memory", "2048"},
			wantOut: []string{
				"RTMR0     22e44a0af16ec8796d49d658438a131994c03154ab37531e2d9ad802205775e8f70b297cada1db7fa64f8b03c0c059b1",
				"RTMR1     3e9d0209771c01791a10591cbd27cbde9892e638519944f26000301545452fb1c629ccf774b0e63da62c60904a49d883",
				"RTMR2     2392480552c81c55a64283523191f66aa2ef465545ffb29dc4486a4b9f8a7c4e5cb6795fbddad865defe6bd88c7aedb3",
				"Boot:      qemu-fw_cfg (kernel, initrd and command line as QEMU hands them to the firmware)",
			},
		},
		{
			name: "json carries the event log",
			args: []string{"--firmware", rvData + "OVMF.debian12u2.fd", "--kernel", kernel, "--memory", "4096", "-o", "json"},
			wantOut: []string{`"memoryMiB": 4096`, `"source": "qemu-fw_cfg"`, `"event": "etc/acpi/tables"`, `"event": "kernel (Authenticode)"`,
				`"edk2": "the firmware carries no version string: assumed edk2 2022.11-2025.02 (--edk2 to say otherwise)"`},
		},
		{
			// QEMU 7.2 placed the initrd 32 KiB lower than berth's old
			// model: vectors-rtmr.psv R8 and R16.
			name: "initrd where QEMU 7.2 puts it",
			args: []string{"--firmware", rvData + "OVMF.debian12u2.fd", "--kernel", kernel, "--initrd", rvData + "initrd-synthetic.bin", "--cmdline", "console=hvc0", "--memory", "2048"},
			wantOut: []string{
				"RTMR1     5237dbb7e79712fe1263d5b2a112f1a63deeba3540eaecad3cd0fe2cb73677ead7b558114d08303d161276ac775c0413",
				"RTMR2     1075d51908619dececf2f111ca5b3c1f7a4d93ceac5d30f5e5b313b3f47c7a8e845dd9f9d2ce40032436acb67aa41376",
			},
		},
		{
			// QEMU 10 offers the kernel unpatched (vectors-rtmr.psv R20).
			name: "QEMU 10 with initrd",
			args: []string{"--qemu", qemu10, "--firmware", rvData + "OVMF.debian12u2.fd", "--kernel", kernel, "--initrd", rvData + "initrd-synthetic.bin", "--cmdline", "console=hvc0", "--memory", "2048", "-o", "json"},
			wantOut: []string{
				`"qemu": "10.0.2"`, `"source": "qemu-fw_cfg"`,
				`"fe068c2a5d2e0516aa936146ca9ab6e3a055ab5b2f245e9d1b21b1c980ea360a95cc82844dc5e6855ac3ca428956e672"`,
				`"1075d51908619dececf2f111ca5b3c1f7a4d93ceac5d30f5e5b313b3f47c7a8e845dd9f9d2ce40032436acb67aa41376"`,
			},
		},
		{name: "edk2 2026.08 firmware: fw_cfg items and SMBIOS in RTMR0", args: []string{"--firmware", rvData + "OVMF.sid-2026.08.fd", "--kernel", kernel, "-o", "json"}, wantOut: []string{`"edk2": "firmware version 2026.08+ds-2 (edk2-stable202608)"`, `"QEMU FW CFG BootMenu"`, `"SMBIOS tables"`, `"Boot0001"`}},
		{
			// berth's own values, pinned; their events are those the
			// firmware itself logs under QEMU 7.2 (TestTPMOracle).
			name: "edk2 2026.08 firmware with initrd",
			args: []string{"--firmware", rvData + "OVMF.sid-2026.08.fd", "--kernel", kernel, "--initrd", rvData + "initrd-synthetic.bin", "--cmdline", "console=hvc0", "--memory", "2048"},
			wantOut: []string{
				"RTMR0     cd29b5a6762016516b1e0f282a538f58b50128671c79e7f2db877546be0d24a0cb8f2bcf58e8a8444139882220b11bff",
				"RTMR1     5237dbb7e79712fe1263d5b2a112f1a63deeba3540eaecad3cd0fe2cb73677ead7b558114d08303d161276ac775c0413",
				"RTMR2     d6880edc64a6d24b179c73eca42abb915c155a54a907874eee789bca6ece4d45945b7b5e7cee67de8234e7d91c86d773",
			},
		},
		{name: "edk2 2026.08 firmware, --edk2 forces the old model", args: []string{"--firmware", rvData + "OVMF.sid-2026.08.fd", "--kernel", kernel, "--edk2", "default"}, wantOut: []string{"edk2:      given with --edk2", "RTMR2"}},
		{name: "secure boot firmware", args: []string{"--firmware", rvData + "OVMF.inteltdx.ms.fd", "--kernel", kernel}, wantCode: ExitUsage, wantErr: "enforces Secure Boot"},
		{name: "non-PE kernel", args: []string{"--firmware", rvData + "OVMF.debian12u2.fd", "--kernel", rvData + "kernel-synthetic.bin"}, wantCode: ExitUsage, wantErr: "no Linux x86 setup header"},
		{name: "memory under firmware minimum", args: []string{"--firmware", rvData + "OVMF.debian12u2.fd", "--kernel", kernel, "--memory", "8"}, wantCode: ExitUsage, wantErr: "under the firmware's minimum"},
		{name: "memory without kernel", args: []string{"--firmware", rvData + "OVMF.debian12u2.fd", "--memory", "4096"}, wantCode: ExitUsage, wantErr: "--memory needs --kernel", noCache: true},
		{name: "bad edk2 profile", args: []string{"--firmware", rvData + "OVMF.debian12u2.fd", "--kernel", kernel, "--edk2", "2030"}, wantCode: ExitUsage, wantErr: "auto, default, 202408, 202505 or 202508"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(append([]string{}, base...), tt.args...)
			if !tt.noCache {
				args = append(args, "--cache", cache)
			}
			code := run(args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tt.wantCode, errb.String())
			}
			for _, s := range tt.wantOut {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			if tt.wantErr != "" && !strings.Contains(errb.String(), tt.wantErr) {
				t.Errorf("stderr lacks %q: %s", tt.wantErr, errb.String())
			}
		})
	}
	entries, err := os.ReadDir(cache + "/acpi")
	// 2048, 4096 and 8 MiB with QEMU 7.2, 2048 with QEMU 10, and 2048 with
	// QEMU 7.2 for the edk2 2026.08 firmware, whose PCIe window QEMU's
	// tables describe elsewhere: the tables are dumped before the firmware
	// and kernel are checked.
	if err != nil || len(entries) != 5 {
		t.Errorf("ACPI cache holds %d entries (%v), want one for each QEMU and memory size", len(entries), err)
	}
	// One for each QEMU, memory size and set of boot inputs that passed
	// the checks before QEMU is asked (2048 MiB with and without the
	// command line and with the initrd, 4096 MiB, QEMU 10; the refused
	// firmwares, kernel and memory size start none).
	if entries, err := os.ReadDir(cache + "/fwcfg"); err != nil || len(entries) != 5 {
		t.Errorf("fw_cfg cache holds %d entries (%v), want 5", len(entries), err)
	}
}
