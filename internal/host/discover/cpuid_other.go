//go:build !amd64 && !386

package discover

// haveCPUID is true where the CPUID instruction exists.
const haveCPUID = false

// readCPUID is never called where there is no CPUID.
func readCPUID() (string, []string) { return "", nil }
