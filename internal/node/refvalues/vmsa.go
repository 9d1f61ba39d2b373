package refvalues

import "encoding/binary"

// VMMType says which code set up the initial register state; QEMU and a
// KVM-only VMM (as on EC2) disagree on a few reset values.
type VMMType int

// The VMM types.
const (
	VMMQEMU VMMType = iota
	VMMKVM
)

// bspEIP is the architectural reset vector of the bootstrap processor.
const bspEIP = 0xfffffff0

// Offsets into the VMSA page (struct sev_es_save_area in Linux
// arch/x86/include/asm/svm.h; AMD APM vol. 2, table "VMSA layout, state
// save area for SEV-ES").
const (
	vmsaES, vmsaCS, vmsaSS, vmsaDS, vmsaFS, vmsaGS = 0x000, 0x010, 0x020, 0x030, 0x040, 0x050
	vmsaGDTR, vmsaLDTR, vmsaIDTR, vmsaTR           = 0x060, 0x070, 0x080, 0x090
	vmsaEFER                                       = 0x0d0
	vmsaCR4, vmsaCR0, vmsaDR7, vmsaDR6             = 0x148, 0x158, 0x160, 0x168
	vmsaRFLAGS, vmsaRIP                            = 0x170, 0x178
	vmsaGPAT                                       = 0x268
	vmsaRDX                                        = 0x310
	vmsaSEVFeatures                                = 0x3b0
	vmsaXCR0                                       = 0x3e8
	vmsaMXCSR                                      = 0x408
	vmsaX87FCW                                     = 0x410
)

// buildVMSA returns the initial VMSA page of a vCPU that starts at eip: the
// x86 reset state (APM vol. 2, "Initial processor state") as the VMM
// loads it, plus the SEV features.
func buildVMSA(eip uint32, sig uint32, features uint64, vmm VMMType) []byte {
	p := make([]byte, pageSize)
	seg := func(off int, sel, attr uint16, limit uint32, base uint64) {
		binary.LittleEndian.PutUint16(p[off:], sel)
		binary.LittleEndian.PutUint16(p[off+2:], attr)
		binary.LittleEndian.PutUint32(p[off+4:], limit)
		binary.LittleEndian.PutUint64(p[off+8:], base)
	}
	u64 := func(off int, v uint64) { binary.LittleEndian.PutUint64(p[off:], v) }

	// QEMU loads its own reset state (x86_cpu_reset); KVM's defaults
	// (init_vmcb) differ in the segment types and leave RDX, MXCSR and FCW
	// zero.
	csAttr, ssAttr, trAttr := uint16(0x9b), uint16(0x93), uint16(0x8b)
	rdx, mxcsr, fcw := uint64(sig), uint32(0x1f80), uint16(0x37f)
	if vmm == VMMKVM {
		ssAttr, trAttr = 0x92, 0x83
		if eip == bspEIP {
			csAttr = 0x9a
		}
		rdx, mxcsr, fcw = 0, 0, 0
	}
	seg(vmsaES, 0, 0x93, 0xffff, 0)
	seg(vmsaCS, 0xf000, csAttr, 0xffff, uint64(eip&0xffff0000))
	seg(vmsaSS, 0, ssAttr, 0xffff, 0)
	seg(vmsaDS, 0, 0x93, 0xffff, 0)
	seg(vmsaFS, 0, 0x93, 0xffff, 0)
	seg(vmsaGS, 0, 0x93, 0xffff, 0)
	seg(vmsaGDTR, 0, 0, 0xffff, 0)
	seg(vmsaLDTR, 0, 0x82, 0xffff, 0)
	seg(vmsaIDTR, 0, 0, 0xffff, 0)
	seg(vmsaTR, 0, trAttr, 0xffff, 0)
	u64(vmsaEFER, 0x1000) // EFER.SVME, required for a running guest
	u64(vmsaCR4, 0x40)    // CR4.MCE
	u64(vmsaCR0, 0x10)    // CR0.ET
	u64(vmsaDR7, 0x400)
	u64(vmsaDR6, 0xffff0ff0)
	u64(vmsaRFLAGS, 0x2)
	u64(vmsaRIP, uint64(eip&0xffff))
	u64(vmsaGPAT, 0x0007040600070406) // power-on PAT
	u64(vmsaRDX, rdx)
	u64(vmsaSEVFeatures, features)
	u64(vmsaXCR0, 0x1)
	binary.LittleEndian.PutUint32(p[vmsaMXCSR:], mxcsr)
	binary.LittleEndian.PutUint16(p[vmsaX87FCW:], fcw)
	return p
}
