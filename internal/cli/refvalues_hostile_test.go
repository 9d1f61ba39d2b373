package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRefvaluesHostileFiles: a FIFO, /dev/zero or an empty file given as
// a boot component is refused at once with exit 2 (invalid input),
// naming the file.
func TestRefvaluesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"FIFO firmware", []string{"--platform", "kata-qemu-snp", "--firmware", fifo}, "not a regular file: FIFO"},
		{"zero kernel", []string{"--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--kernel", "/dev/zero"}, "not a regular file: character device"},
		{"FIFO initrd", []string{"--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--kernel", rvData + "kernel-synthetic.bin", "--initrd", fifo}, "not a regular file: FIFO"},
		{"empty kernel", []string{"--platform", "kata-qemu-snp", "--firmware", rvData + "OVMF.amdsev.fd", "--kernel", empty}, "is empty"},
		{"zero TDX kernel", []string{"--platform", "kata-qemu-tdx", "--firmware", rvData + "OVMF.debian12u2.fd", "--kernel", "/dev/zero"}, "not a regular file: character device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"refvalues"}, tc.args...), strings.NewReader(""), &out, &errb, func(string) string { return "" })
			if code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, stderr %s; want exit %d saying %q", code, errb.String(), ExitUsage, tc.want)
			}
		})
	}
}
