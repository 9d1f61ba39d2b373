package refvalues

import (
	"fmt"
)

// TDXRTMRRequest are the direct-boot inputs of RTMR0-2 in a TDXRequest.
type TDXRTMRRequest struct {
	Kernel, Initrd Component
	// Cmdline is the -append value; nil is the empty command line.
	Cmdline   *string
	MemoryMiB uint64
	// ACPI are QEMU's ACPI blobs for the guest (DumpACPIBlobs).
	ACPI *ACPIBlobs
	// QEMU is the QEMU version the blobs came from; its major version
	// selects whether the kernel's setup header is patched.
	QEMU    [3]int
	Profile EDK2Profile
	// FwCfg, when set, asks QEMU what it hands the firmware for the kernel,
	// initrd (nil for none) and command line read (CachedBootBlobs): RTMR1
	// and RTMR2 measure that. Without it they measure berth's model of
	// QEMU's loader, and say so (RTMRValues.Source).
	FwCfg func(kernel, initrd []byte, cmdline string) (*FwCfgBoot, error)
}

// RTMRValues are RTMR0-2 of a directly booted TD with the inputs that
// determine them beyond the boot components.
type RTMRValues struct {
	MemoryMiB uint64 `json:"memoryMiB"`
	QEMU      string `json:"qemu"`
	// Source is where RTMR1 and RTMR2's kernel, initrd and command line
	// came from: SourceFwCfg (QEMU asked) or SourceModel.
	Source string       `json:"source"`
	RTMR   [3]Digest384 `json:"rtmr"`
	Events []TDXEvent   `json:"events"`
	// EDK2 says which edk2 event-log profile was used and why.
	EDK2 string `json:"edk2,omitempty"`
}

// maxInitrdSize bounds an initrd: QEMU loads it whole below the kernel's
// initrd_addr_max, which is 0x7fffffff for every kernel of boot protocol
// 2.03 and later (0x37ffffff before), and refuses a larger one ("initrd
// is too large"); real initrds are tens to a few hundred MiB.
const maxInitrdSize = 2 << 30

// tdxRTMRs reads the kernel and initrd and computes RTMR0-2 for t.
func tdxRTMRs(t *TDVF, r *TDXRTMRRequest, in *Inputs) (*RTMRValues, error) {
	if !r.Kernel.Given() {
		return nil, fmt.Errorf("no kernel given: RTMR1 measures the direct-boot kernel")
	}
	kernel, kIn, err := r.Kernel.readAll("kernel", maxKernelSize)
	if err != nil {
		return nil, err
	}
	in.Kernel = &kIn
	// A firmware that would not boot the kernel at all says so before
	// its release is looked at.
	if cfv, err := t.cfvSection(); err == nil {
		if err := checkSecureBoot(cfv); err != nil {
			return nil, err
		}
	}
	profile, why, err := resolveEDK2(r.Profile, t.Image)
	if err != nil {
		return nil, err
	}
	req := RTMRRequest{Firmware: t, MemoryMiB: r.MemoryMiB, ACPI: r.ACPI, Kernel: kernel, QEMUMajor: r.QEMU[0], Profile: profile}
	if r.Initrd.Given() {
		initrd, iIn, err := r.Initrd.readAll("initrd", maxInitrdSize)
		if err != nil {
			return nil, err
		}
		if len(initrd) == 0 {
			return nil, fmt.Errorf("initrd %s is empty", r.Initrd.Name())
		}
		req.Initrd, in.Initrd = initrd, &iIn
	}
	if r.Cmdline != nil {
		req.Cmdline = *r.Cmdline
		c := *r.Cmdline
		in.Cmdline = &c
	}
	if r.FwCfg != nil {
		// QEMU's refusal of a kernel that is not a whole bzImage says less
		// than berth's, and QEMU loads a file without a setup header as
		// some other kind of kernel.
		if err := checkBzImage(kernel); err != nil {
			return nil, fmt.Errorf("RTMRs with kernel %s: %w", r.Kernel.Name(), err)
		}
		// RTMR0's inputs are checked first: no QEMU is started for a
		// firmware or memory size refused anyway.
		if _, err := rtmr0Events(req); err != nil {
			return nil, fmt.Errorf("RTMRs with kernel %s: %w", r.Kernel.Name(), err)
		}
		if req.FwCfg, err = r.FwCfg(req.Kernel, req.Initrd, req.Cmdline); err != nil {
			return nil, fmt.Errorf("asking QEMU for the boot items of kernel %s: %w", r.Kernel.Name(), err)
		}
	}
	rt, err := ComputeRTMRs(req)
	if err != nil {
		return nil, fmt.Errorf("RTMRs with kernel %s: %w", r.Kernel.Name(), err)
	}
	return &RTMRValues{
		MemoryMiB: r.MemoryMiB, QEMU: fmt.Sprintf("%d.%d.%d", r.QEMU[0], r.QEMU[1], r.QEMU[2]), Source: rt.Source,
		RTMR: rt.RTMR, Events: rt.Events, EDK2: why,
	}, nil
}
