package refvalues

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
)

// SNP page types of SNP_LAUNCH_UPDATE (SEV-SNP firmware ABI, table "Page
// types").
const (
	pageNormal     = 0x1
	pageVMSA       = 0x2
	pageZero       = 0x3
	pageUnmeasured = 0x4
	pageSecrets    = 0x5
	pageCPUID      = 0x6
)

// vmsaGPA is the GPA the launch digest records for VMSA pages: KVM does not
// map VMSAs into the guest, and the firmware takes the last page below the
// 52-bit limit it uses for them.
const vmsaGPA = 0x0000_ffff_ffff_f000

// Digest384 is a SHA-384 value: a launch digest or MRTD.
type Digest384 [48]byte

// String returns lowercase hex.
func (d Digest384) String() string { return fmt.Sprintf("%x", d[:]) }

// MarshalText encodes the digest as lowercase hex for JSON and YAML.
func (d Digest384) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// gctx replays the launch digest the PSP keeps in the guest context: every
// SNP_LAUNCH_UPDATE replaces it with SHA-384 of a PAGE_INFO structure that
// embeds the previous digest.
type gctx struct {
	ld   Digest384
	info [0x70]byte
	h    hash.Hash
}

func newGctx(start Digest384) *gctx { return &gctx{ld: start, h: sha512.New384()} }

// update absorbs one page. PAGE_INFO (firmware ABI, "PAGE_INFO
// structure"): DIGEST_CUR[48], CONTENTS[48], LENGTH u16 = 0x70, PAGE_TYPE
// u8, IMI_PAGE u8, VMPL3/2/1_PERMS u8, reserved u8, GPA u64.
func (g *gctx) update(pageType byte, gpa uint64, contents *Digest384) {
	b := g.info[:]
	copy(b[0:48], g.ld[:])
	if contents != nil {
		copy(b[48:96], contents[:])
	} else {
		clear(b[48:96])
	}
	binary.LittleEndian.PutUint16(b[96:], 0x70)
	b[98] = pageType
	clear(b[99:104]) // not an IMI page; VMPL permissions are 0 at launch
	binary.LittleEndian.PutUint64(b[104:], gpa)
	g.h.Reset()
	g.h.Write(b)
	g.h.Sum(g.ld[:0])
}

// normalPages measures data page by page as normal pages starting at gpa.
// len(data) must be a multiple of the page size.
func (g *gctx) normalPages(gpa uint64, data []byte) {
	for off := 0; off < len(data); off += pageSize {
		d := Digest384(sha512.Sum384(data[off : off+pageSize]))
		g.update(pageNormal, gpa+uint64(off), &d)
	}
}

// emptyPages measures size bytes at gpa as pages of a type whose contents
// the firmware does not hash.
func (g *gctx) emptyPages(pageType byte, gpa, size uint64) {
	for off := uint64(0); off < size; off += pageSize {
		g.update(pageType, gpa+off, nil)
	}
}

// SEVHashes are the SHA-256 values QEMU writes into the SEV hashes table
// for measured direct boot.
type SEVHashes struct {
	Kernel, Initrd, Cmdline [32]byte
}

// HashComponents hashes the direct-boot components the way QEMU does: the
// kernel and initrd files as they are (an absent initrd hashes as empty),
// the command line with its terminating NUL (an absent one is just the NUL).
// kernel must not be nil; initrd may be.
func HashComponents(kernel, initrd io.Reader, cmdline string) (SEVHashes, error) {
	var h SEVHashes
	k := sha256.New()
	if _, err := io.Copy(k, kernel); err != nil {
		return h, fmt.Errorf("hashing kernel: %w", err)
	}
	k.Sum(h.Kernel[:0])
	i := sha256.New()
	if initrd != nil {
		if _, err := io.Copy(i, initrd); err != nil {
			return h, fmt.Errorf("hashing initrd: %w", err)
		}
	}
	i.Sum(h.Initrd[:0])
	h.Cmdline = sha256.Sum256(append([]byte(cmdline), 0))
	return h, nil
}

// hashTableSize is sizeof(SevHashTable) in QEMU: GUID, u16 length, then
// three entries of GUID, u16 length, SHA-256.
const (
	hashEntrySize = 16 + 2 + 32
	hashTableSize = 16 + 2 + 3*hashEntrySize
)

// table serialises the SEV hashes table (entries in the order command line,
// initrd, kernel, as QEMU lays them out).
func (h SEVHashes) table() []byte {
	b := make([]byte, 0, hashTableSize)
	g := mustGUID(guidHashTable)
	b = append(b, g[:]...)
	b = binary.LittleEndian.AppendUint16(b, hashTableSize)
	for _, e := range []struct {
		guid string
		sum  [32]byte
	}{{guidHashCmdline, h.Cmdline}, {guidHashInitrd, h.Initrd}, {guidHashKernel, h.Kernel}} {
		g := mustGUID(e.guid)
		b = append(b, g[:]...)
		b = binary.LittleEndian.AppendUint16(b, hashEntrySize)
		b = append(b, e.sum[:]...)
	}
	return b
}

// FirmwareDigest is the launch digest after the firmware pages alone: every
// page of the image, as normal pages, with the image ending at 4 GiB.
func FirmwareDigest(o *OVMF) Digest384 {
	g := newGctx(Digest384{})
	g.normalPages(o.GPA(), o.Image)
	return g.ld
}

// SNPPrefix is the launch digest after the firmware and the metadata
// sections, before any VMSA. It depends neither on the vCPU type nor on the
// number of vCPUs, so one prefix serves every product line.
type SNPPrefix struct {
	Digest Digest384
	// Firmware is the digest after the firmware pages alone (see
	// FirmwareDigest), kept because hashing the image twice is the
	// largest avoidable cost.
	Firmware Digest384
	resetEIP uint32
}

// MeasureSNP replays the launch updates QEMU issues before the VMSAs: the
// firmware pages, then the SEV metadata sections in the order OVMF lists
// them. hashes is nil without measured direct boot; then the kernel hashes
// section is measured as zero pages, as QEMU does.
func MeasureSNP(o *OVMF, hashes *SEVHashes) (SNPPrefix, error) {
	fwDigest := FirmwareDigest(o)
	g := newGctx(fwDigest)
	hashesDone := false
	for i, s := range o.Sections {
		switch s.Type {
		case SEVSectionZero, SEVSectionSVSMCAA:
			g.emptyPages(pageZero, s.GPA, s.Size)
		case SEVSectionSecrets:
			g.emptyPages(pageSecrets, s.GPA, s.Size)
		case SEVSectionCPUID:
			g.emptyPages(pageCPUID, s.GPA, s.Size)
		case SEVSectionKernelHashes:
			if hashes == nil {
				g.emptyPages(pageZero, s.GPA, s.Size)
				continue
			}
			page, err := hashesPage(o, s, i, *hashes)
			if err != nil {
				return SNPPrefix{}, err
			}
			g.normalPages(s.GPA, page)
			hashesDone = true
		}
	}
	if hashes != nil && !hashesDone {
		return SNPPrefix{}, fmt.Errorf("firmware has no SNP_KERNEL_HASHES section in its SEV metadata (GUID %s): it cannot measure a kernel, initrd or command line (use an AmdSev OVMF build)", guidSEVMetadata)
	}
	return SNPPrefix{Digest: g.ld, Firmware: fwDigest, resetEIP: o.ResetEIP}, nil
}

// hashesPage builds the contents of the kernel hashes section: zero except
// for the hashes table at the GPA the firmware announces.
func hashesPage(o *OVMF, s SEVSection, idx int, h SEVHashes) ([]byte, error) {
	if o.HashTableGPA == 0 {
		return nil, fmt.Errorf("firmware lacks the SEV hashes table location (footer table GUID %s): it cannot measure a kernel, initrd or command line", guidSEVHashTable)
	}
	gpa, size := uint64(o.HashTableGPA), uint64(o.HashTableSize)
	if size < hashTableSize || gpa < s.GPA || gpa+size > s.GPA+s.Size {
		return nil, fmt.Errorf("SEV hashes table [%#x, %#x) (GUID %s) does not fit SEV metadata section %d (%s) [%#x, %#x) or is smaller than %d bytes",
			gpa, gpa+size, guidSEVHashTable, idx, s.Type, s.GPA, s.GPA+s.Size, hashTableSize)
	}
	page := make([]byte, s.Size)
	copy(page[gpa-s.GPA:], h.table())
	return page, nil
}

// MaxVCPUs is the most vCPUs berth computes digests for; QEMU's SNP guests
// are limited far below, and the bound keeps a typo from hashing forever.
const MaxVCPUs = 512

// LaunchDigests continues the prefix with one VMSA per vCPU and returns
// the launch digest for 1..maxVCPUs vCPUs (index i holds i+1 vCPUs). The
// VMSAs come last, so every count is one more update on the previous one.
func (p SNPPrefix) LaunchDigests(vcpu VCPUType, guestFeatures uint64, vmm VMMType, maxVCPUs int) ([]Digest384, error) {
	if maxVCPUs < 1 || maxVCPUs > MaxVCPUs {
		return nil, fmt.Errorf("vCPU count %d out of range: expected 1..%d", maxVCPUs, MaxVCPUs)
	}
	if vcpu.Signature == 0 {
		return nil, fmt.Errorf("vCPU type %q has no CPUID signature", vcpu.Name)
	}
	bsp := Digest384(sha512.Sum384(buildVMSA(bspEIP, vcpu.Signature, guestFeatures, vmm)))
	ap := Digest384(sha512.Sum384(buildVMSA(p.resetEIP, vcpu.Signature, guestFeatures, vmm)))
	g := newGctx(p.Digest)
	out := make([]Digest384, 0, maxVCPUs)
	for i := range maxVCPUs {
		if i == 0 {
			g.update(pageVMSA, vmsaGPA, &bsp)
		} else {
			g.update(pageVMSA, vmsaGPA, &ap)
		}
		out = append(out, g.ld)
	}
	return out, nil
}
