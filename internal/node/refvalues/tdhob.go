package refvalues

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// QEMU's q35 machine splits guest RAM at the 4 GiB hole: a guest of at least
// 2816 MiB (0xb0000000) gets 2 GiB below 4 GiB and the rest above it;
// smaller guests keep all RAM below 4 GiB (hw/i386/pc_q35.c).
const (
	q35LowMemThreshold = 0xb0000000
	q35LowMemCap       = 0x80000000
	highMemBase        = 1 << 32
)

// q35LowMem returns how much of memBytes QEMU's q35 maps below 4 GiB.
func q35LowMem(memBytes uint64) uint64 {
	if memBytes >= q35LowMemThreshold {
		return q35LowMemCap
	}
	return memBytes
}

// HOB types and resource types (UEFI PI specification, volume 3).
const (
	hobTypeHandoff          = 0x0001
	hobTypeResourceDesc     = 0x0003
	hobHandoffVersion       = 9
	hobResourceSystemMemory = 0x0
	hobResourceUnaccepted   = 0x7
	// present | initialized | tested
	hobResourceAttributes = 0x7
	hobHandoffSize        = 56
	hobResourceSize       = 48
	hobEndSize            = 8
)

// ramRange is a piece of guest RAM as the VMM reports it in the TD HOB:
// accepted (added at build time) or left for the guest to accept.
type ramRange struct {
	start, end uint64
	accepted   bool
}

// TDHOB builds the TD hand-off block QEMU writes into the firmware's TD_HOB
// section for a guest of memMiB MiB, as the firmware measures it into RTMR0:
// the PHIT header, then one resource descriptor per RAM range in address
// order, the TempMem and TD_HOB sections as accepted system memory and all
// other RAM unaccepted; the end-of-list HOB is not measured.
func TDHOB(t *TDVF, memMiB uint64) ([]byte, error) {
	if memMiB == 0 || memMiB > 1<<24 {
		return nil, fmt.Errorf("guest memory %d MiB: expected 1 MiB to 16 TiB", memMiB)
	}
	mem := memMiB << 20
	low := q35LowMem(mem)
	var hobBase uint64
	var hobSeen bool
	var accept [][2]uint64
	for i, s := range t.Sections {
		if s.Type != TDVFSectionTempMem && s.Type != TDVFSectionTDHOB {
			continue
		}
		if s.Type == TDVFSectionTDHOB {
			if hobSeen {
				return nil, fmt.Errorf("TDVF metadata section %d: a second TD_HOB section", i)
			}
			hobBase, hobSeen = s.GPA, true
		}
		if s.GPA+s.MemSize > low {
			return nil, fmt.Errorf("guest memory %d MiB is under the firmware's minimum: TDVF section %d (%s) needs RAM up to %#x (%d MiB) below 4 GiB", memMiB, i, s.Type, s.GPA+s.MemSize, (s.GPA+s.MemSize+(1<<20)-1)>>20)
		}
		accept = append(accept, [2]uint64{s.GPA, s.GPA + s.MemSize})
	}
	if !hobSeen {
		return nil, fmt.Errorf("TDVF metadata has no TD_HOB section: the firmware takes no hand-off block from the VMM")
	}
	sort.Slice(accept, func(a, b int) bool { return accept[a][0] < accept[b][0] })
	var ranges []ramRange
	cur := uint64(0)
	for _, a := range accept {
		if a[0] < cur {
			return nil, fmt.Errorf("TDVF TempMem/TD_HOB sections overlap at %#x", a[0])
		}
		if a[0] > cur {
			ranges = append(ranges, ramRange{start: cur, end: a[0]})
		}
		ranges = append(ranges, ramRange{start: a[0], end: a[1], accepted: true})
		cur = a[1]
	}
	if cur < low {
		ranges = append(ranges, ramRange{start: cur, end: low})
	}
	if mem > low {
		ranges = append(ranges, ramRange{start: highMemBase, end: highMemBase + mem - low})
	}

	hob := make([]byte, hobHandoffSize, hobHandoffSize+hobResourceSize*len(ranges))
	binary.LittleEndian.PutUint16(hob[0:], hobTypeHandoff)
	binary.LittleEndian.PutUint16(hob[2:], hobHandoffSize)
	binary.LittleEndian.PutUint32(hob[8:], hobHandoffVersion)
	// BootMode 0 (full configuration) and the memory fields stay zero: the
	// firmware finds its memory in the resource descriptors.
	for _, r := range ranges {
		var d [hobResourceSize]byte
		binary.LittleEndian.PutUint16(d[0:], hobTypeResourceDesc)
		binary.LittleEndian.PutUint16(d[2:], hobResourceSize)
		typ := uint32(hobResourceUnaccepted)
		if r.accepted {
			typ = hobResourceSystemMemory
		}
		binary.LittleEndian.PutUint32(d[24:], typ)
		binary.LittleEndian.PutUint32(d[28:], hobResourceAttributes)
		binary.LittleEndian.PutUint64(d[32:], r.start)
		binary.LittleEndian.PutUint64(d[40:], r.end-r.start)
		hob = append(hob, d[:]...)
	}
	binary.LittleEndian.PutUint64(hob[48:], hobBase+uint64(len(hob))+hobEndSize)
	return hob, nil
}
