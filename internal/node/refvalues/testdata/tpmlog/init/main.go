// Command init is the /init of the initrd the TPM oracle test boots
// (tpmoracle_test.go): it prints the firmware's TCG2 event log, as the
// kernel exposes it in securityfs, to the console in base64 between
// marker lines, then powers the guest off. Static, standard library only.
package main

import (
	"encoding/base64"
	"fmt"
	"os"
	"syscall"
)

const logPath = "/sys/kernel/security/tpm0/binary_bios_measurements"

func main() {
	defer syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
	if err := syscall.Mount("sysfs", "/sys", "sysfs", 0, ""); err != nil {
		fmt.Println("BERTH-ERROR mount sysfs:", err)
		return
	}
	if err := syscall.Mount("securityfs", "/sys/kernel/security", "securityfs", 0, ""); err != nil {
		fmt.Println("BERTH-ERROR mount securityfs:", err)
		return
	}
	// securityfs reports size 0: read to EOF.
	b, err := os.ReadFile(logPath)
	if err != nil {
		fmt.Println("BERTH-ERROR", err)
		return
	}
	print("LOG", b)
	// The SMBIOS structure table as the firmware published it: not
	// compared, printed so that a difference in the SMBIOS event can be
	// looked into.
	if dmi, err := os.ReadFile("/sys/firmware/dmi/tables/DMI"); err == nil {
		print("DMI", dmi)
	}
}

// print writes b in base64 between BERTH-name-BEGIN and -END lines.
func print(name string, b []byte) {
	fmt.Printf("BERTH-%s-BEGIN\n", name)
	s := base64.StdEncoding.EncodeToString(b)
	for len(s) > 76 {
		fmt.Println(s[:76])
		s = s[76:]
	}
	fmt.Println(s)
	fmt.Printf("BERTH-%s-END\n", name)
}
