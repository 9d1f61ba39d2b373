package refvalues

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// lzmaDecode decompresses an LZMA ("alone") stream as edk2's LzmaCompress
// writes it into a firmware volume: 5 bytes of properties (lc/lp/pb and
// the dictionary size), the uncompressed size as 8 little-endian bytes,
// then the range-coded data. The decoder follows the LZMA specification
// (Igor Pavlov, LZMA SDK DOC/lzma-specification.txt); a stream whose size
// is above limit, or that is cut short or inconsistent, is refused.
func lzmaDecode(src []byte, limit int) ([]byte, error) {
	if len(src) < 13 {
		return nil, errors.New("LZMA header cut short")
	}
	d := int(src[0])
	if d >= 9*5*5 {
		return nil, fmt.Errorf("LZMA properties byte %#x out of range", d)
	}
	lc, lp, pb := uint(d%9), uint(d/9%5), uint(d/45)
	size := binary.LittleEndian.Uint64(src[5:])
	if size > uint64(limit) {
		return nil, fmt.Errorf("LZMA stream of %d bytes uncompressed, more than the %d a firmware volume can have", size, limit)
	}
	z := &lzmaState{in: src[13:], out: make([]byte, 0, size), lc: lc, lp: lp, pb: pb}
	if err := z.run(int(size)); err != nil {
		return nil, err
	}
	return z.out, nil
}

const (
	lzmaStates     = 12
	lzmaPosBitsMax = 4
	lzmaEndPos     = 14
	lzmaFullDist   = 128
	lzmaAlignBits  = 4
	lzmaProbInit   = 1 << 10
)

type lzmaLen struct {
	choice, choice2 uint16
	low, mid        [1 << lzmaPosBitsMax][1 << 3]uint16
	high            [1 << 8]uint16
}

type lzmaState struct {
	in          []byte
	pos         int
	rng, code   uint32
	out         []byte
	lc, lp, pb  uint
	err         error
	lit         []uint16
	isMatch     [lzmaStates << lzmaPosBitsMax]uint16
	isRep       [lzmaStates]uint16
	isRepG0     [lzmaStates]uint16
	isRepG1     [lzmaStates]uint16
	isRepG2     [lzmaStates]uint16
	isRep0Long  [lzmaStates << lzmaPosBitsMax]uint16
	posSlot     [4][1 << 6]uint16
	posDecoders [1 + lzmaFullDist - lzmaEndPos]uint16
	align       [1 << lzmaAlignBits]uint16
	length, rep lzmaLen
}

func (z *lzmaState) byte() byte {
	if z.pos >= len(z.in) {
		z.err = errors.New("LZMA stream cut short")
		return 0
	}
	b := z.in[z.pos]
	z.pos++
	return b
}

func (z *lzmaState) normalize() {
	if z.rng < 1<<24 {
		z.rng <<= 8
		z.code = z.code<<8 | uint32(z.byte())
	}
}

func (z *lzmaState) bit(p *uint16) uint32 {
	bound := (z.rng >> 11) * uint32(*p)
	var b uint32
	if z.code < bound {
		z.rng = bound
		*p += (1<<11 - *p) >> 5
	} else {
		z.rng -= bound
		z.code -= bound
		*p -= *p >> 5
		b = 1
	}
	z.normalize()
	return b
}

func (z *lzmaState) direct(n uint) uint32 {
	var r uint32
	for ; n > 0; n-- {
		z.rng >>= 1
		z.code -= z.rng
		t := 0 - (z.code >> 31)
		z.code += z.rng & t
		if z.code == z.rng {
			z.err = errors.New("LZMA stream corrupt (direct bits)")
		}
		z.normalize()
		r = r<<1 + t + 1
	}
	return r
}

func (z *lzmaState) tree(p []uint16, bits uint) uint32 {
	m := uint32(1)
	for range bits {
		m = m<<1 + z.bit(&p[m])
	}
	return m - 1<<bits
}

func (z *lzmaState) reverse(p []uint16, bits uint) uint32 {
	m, sym := uint32(1), uint32(0)
	for i := range bits {
		b := z.bit(&p[m])
		m = m<<1 + b
		sym |= b << i
	}
	return sym
}

func (z *lzmaState) decodeLen(l *lzmaLen, posState uint32) uint32 {
	if z.bit(&l.choice) == 0 {
		return z.tree(l.low[posState][:], 3)
	}
	if z.bit(&l.choice2) == 0 {
		return 8 + z.tree(l.mid[posState][:], 3)
	}
	return 16 + z.tree(l.high[:], 8)
}

func (z *lzmaState) distance(l uint32) uint32 {
	slot := z.tree(z.posSlot[min(l, 3)][:], 6)
	if slot < 4 {
		return slot
	}
	n := uint(slot>>1) - 1
	dist := (2 | slot&1) << n
	if slot < lzmaEndPos {
		return dist + z.reverse(z.posDecoders[dist-slot:], n)
	}
	dist += z.direct(n-lzmaAlignBits) << lzmaAlignBits
	return dist + z.reverse(z.align[:], lzmaAlignBits)
}

func lzmaInit(p []uint16) {
	for i := range p {
		p[i] = lzmaProbInit
	}
}

func (z *lzmaState) run(size int) error {
	z.lit = make([]uint16, 0x300<<(z.lc+z.lp))
	lzmaInit(z.lit)
	for _, p := range [][]uint16{z.isMatch[:], z.isRep[:], z.isRepG0[:], z.isRepG1[:], z.isRepG2[:], z.isRep0Long[:], z.posDecoders[:], z.align[:]} {
		lzmaInit(p)
	}
	for i := range z.posSlot {
		lzmaInit(z.posSlot[i][:])
	}
	for _, l := range []*lzmaLen{&z.length, &z.rep} {
		l.choice, l.choice2 = lzmaProbInit, lzmaProbInit
		for i := range l.low {
			lzmaInit(l.low[i][:])
			lzmaInit(l.mid[i][:])
		}
		lzmaInit(l.high[:])
	}
	if z.byte() != 0 {
		return errors.New("LZMA stream corrupt (first byte not zero)")
	}
	z.rng = 0xffffffff
	for range 4 {
		z.code = z.code<<8 | uint32(z.byte())
	}
	var state, rep0, rep1, rep2, rep3 uint32
	for len(z.out) < size {
		if z.err != nil {
			return z.err
		}
		pos := uint32(len(z.out))
		posState := pos & (1<<z.pb - 1)
		if z.bit(&z.isMatch[state<<lzmaPosBitsMax+posState]) == 0 {
			var prev uint32
			if pos > 0 {
				prev = uint32(z.out[pos-1])
			}
			lit := z.lit[0x300*((pos&(1<<z.lp-1))<<z.lc+prev>>(8-z.lc)):]
			sym := uint32(1)
			if state >= 7 {
				if rep0 >= pos {
					return errors.New("LZMA stream corrupt (distance before the start)")
				}
				match := uint32(z.out[pos-rep0-1])
				for sym < 0x100 {
					mb := match >> 7 & 1
					match <<= 1
					b := z.bit(&lit[(1+mb)<<8+sym])
					sym = sym<<1 | b
					if mb != b {
						break
					}
				}
			}
			for sym < 0x100 {
				sym = sym<<1 | z.bit(&lit[sym])
			}
			z.out = append(z.out, byte(sym))
			switch {
			case state < 4:
				state = 0
			case state < 10:
				state -= 3
			default:
				state -= 6
			}
			continue
		}
		var l uint32
		if z.bit(&z.isRep[state]) != 0 {
			if pos == 0 {
				return errors.New("LZMA stream corrupt (repeat before any output)")
			}
			if z.bit(&z.isRepG0[state]) == 0 {
				if z.bit(&z.isRep0Long[state<<lzmaPosBitsMax+posState]) == 0 {
					state = lzmaNext(state, 9, 11)
					z.out = append(z.out, z.out[pos-rep0-1])
					continue
				}
			} else {
				var dist uint32
				if z.bit(&z.isRepG1[state]) == 0 {
					dist = rep1
				} else {
					if z.bit(&z.isRepG2[state]) == 0 {
						dist = rep2
					} else {
						dist, rep3 = rep3, rep2
					}
					rep2 = rep1
				}
				rep1, rep0 = rep0, dist
			}
			l = z.decodeLen(&z.rep, posState)
			state = lzmaNext(state, 8, 11)
		} else {
			rep3, rep2, rep1 = rep2, rep1, rep0
			l = z.decodeLen(&z.length, posState)
			state = lzmaNext(state, 7, 10)
			rep0 = z.distance(l)
			if rep0 == 0xffffffff {
				break // end marker
			}
		}
		if rep0 >= pos {
			return errors.New("LZMA stream corrupt (distance before the start)")
		}
		n := int(l) + 2
		if n > size-len(z.out) {
			return errors.New("LZMA stream corrupt (match past the stated size)")
		}
		from := int(pos - rep0 - 1)
		for i := range n {
			z.out = append(z.out, z.out[from+i])
		}
	}
	if z.err != nil {
		return z.err
	}
	if len(z.out) != size {
		return fmt.Errorf("LZMA stream ends after %d of %d bytes", len(z.out), size)
	}
	return nil
}

// lzmaNext is the state after a match, repeat or short repeat: afterLit
// when the previous packet was a literal (state < 7), else afterMatch.
func lzmaNext(state, afterLit, afterMatch uint32) uint32 {
	if state < 7 {
		return afterLit
	}
	return afterMatch
}
