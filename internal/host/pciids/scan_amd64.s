//go:build amd64

#include "go_asm.h"
#include "textflag.h"

// MASK64(lo, hi, dst) sets dst to the 64-bit mask of the bytes set in lo
// (bits 0-31) and hi (32-63); it uses BX.
#define MASK64(lo, hi, dst) \
	VPMOVMSKB	lo, dst; \
	VPMOVMSKB	hi, BX; \
	SHLQ	$32, BX; \
	ORQ	BX, dst

// NEXTSTEP counts the newlines of a step with no line to look at (masks
// Y2 and Y6) into R9 and moves SI to the next step.
#define NEXTSTEP \
	VPMOVMSKB	Y2, AX; \
	VPMOVMSKB	Y6, BX; \
	POPCNTL	AX, AX; \
	POPCNTL	BX, BX; \
	ADDQ	AX, R9; \
	ADDQ	BX, R9; \
	ADDQ	$64, SI

// JUDGE(line, pass, rec, next) ends the judging of the line whose id
// (four bytes) is in BX, the newline before it at SI+CX: an id that is
// not four hex digits (checked a lane each, letters lower-cased first), or
// whose idHash (times 0x9e3779b1, top byte) is set in filter, is recorded
// (rec: its index and the newlines before it, from the mask DX, into
// out); any other line is passed (pass: the newline before it kept in
// passed). next clears the line's bit in AX and goes on to the next line
// of the step, if any.
#define JUDGE(line, pass, rec, next) \
	TESTL	$0x80808080, BX; \
	JNZ	rec; \
	LEAL	0x50505050(BX), R8; \
	LEAL	0x46464646(BX), R11; \
	NOTL	R11; \
	ANDL	R11, R8; \
	ORL	$0x20202020, BX; \
	LEAL	0x1f1f1f1f(BX), R11; \
	LEAL	0x19191919(BX), R12; \
	NOTL	R12; \
	ANDL	R12, R11; \
	ORL	R11, R8; \
	ANDL	$0x80808080, R8; \
	CMPL	R8, $0x80808080; \
	JNE	rec; \
	IMUL3L	$-1640531535, BX, BX; \
	SHRL	$24, BX; \
	MOVL	BX, R11; \
	SHRL	$6, R11; \
	MOVQ	filter+32(FP), R8; \
	MOVQ	(R8)(R11*8), R8; \
	BTQ	BX, R8; \
	JCS	rec; \
pass: \
	LEAQ	(SI)(CX*1), R11; \
	MOVQ	R11, passed+72(FP); \
	JMP	next; \
rec: \
	MOVQ	$1, R8; \
	SHLQ	CX, R8; \
	DECQ	R8; \
	ANDQ	DX, R8; \
	POPCNTQ	R8, R8; \
	ADDQ	R9, R8; \
	LEAQ	(SI)(CX*1), R11; \
	SUBQ	b_base+0(FP), R11; \
	MOVQ	out+40(FP), R12; \
	MOVL	R11, (R12)(R10*8); \
	MOVL	R8, 4(R12)(R10*8); \
	INCQ	R10; \
next: \
	LEAQ	-1(AX), R8; \
	ANDQ	R8, AX; \
	JNZ	line

// func hasAVX2() bool
TEXT ·hasAVX2(SB), NOSPLIT, $0-1
	MOVL	$0, AX
	MOVL	$0, CX
	CPUID
	CMPL	AX, $7
	JB	no
	MOVL	$1, AX
	MOVL	$0, CX
	CPUID
	// ECX: POPCNT (bit 23), OSXSAVE (27), AVX (28).
	ANDL	$0x18800000, CX
	CMPL	CX, $0x18800000
	JNE	no
	// XCR0: the operating system saves the XMM (bit 1) and YMM (2) state.
	MOVL	$0, CX
	XGETBV
	ANDL	$6, AX
	CMPL	AX, $6
	JNE	no
	MOVL	$7, AX
	MOVL	$0, CX
	CPUID
	// EBX: AVX2 (bit 5).
	SHRL	$5, BX
	ANDL	$1, BX
	MOVB	BX, ret+0(FP)
	RET
no:
	MOVB	$0, ret+0(FP)
	RET


// func scanAVX2(b []byte, dev bool, filter *idSet, out *[batchCap]entry) (n, lines, count, passed int)
//
// Each step compares the 64 bytes at SI with '\n', and the 64 bytes one
// and two further on with '\t', giving masks of the lines to look at (AX)
// and of the newlines (DX). Each line found is then judged in general
// registers: the four bytes of its id are checked to be hex digits a lane
// each, as hex4 does, and looked up in filter as idSet.has does.
// Registers: SI the step, DI the last step, R9 newlines before SI, R10
// entries recorded, R13 (with dev) the lines in the step that do not
// start with a tab and have not been passed. Until the end, passed holds
// the address of the newline before the last line passed, or 0.
TEXT ·scanAVX2(SB), NOSPLIT, $0-80
	MOVQ	b_base+0(FP), SI
	MOVQ	b_len+8(FP), CX
	MOVBLZX	dev+24(FP), DX
	MOVQ	$0, passed+72(FP)
	MOVQ	SI, DI
	XORL	R9, R9
	XORL	R10, R10
	SUBQ	$66, CX
	JLT	short
	ADDQ	CX, DI
	MOVL	$0x0a, AX
	MOVD	AX, X1
	VPBROADCASTB	X1, Y1	// '\n' in every byte
	MOVL	$0x09, AX
	MOVD	AX, X3
	VPBROADCASTB	X3, Y3	// '\t' in every byte
	TESTQ	DX, DX
	JNZ	devloop

skiploop:
	VPCMPEQB	(SI), Y1, Y2	// newlines at 0-31
	VPCMPEQB	32(SI), Y1, Y6	// and 32-63
	VPCMPEQB	1(SI), Y3, Y4	// a tab after
	VPCMPEQB	33(SI), Y3, Y7
	VPANDN	Y2, Y4, Y5	// Y5, Y8 = newline &^ tab after
	VPANDN	Y6, Y7, Y8
	VPOR	Y5, Y8, Y9
	VPTEST	Y9, Y9
	JNZ	skipfound
	NEXTSTEP
	CMPQ	SI, DI
	JLS	skiploop
	JMP	done

skipfound:
	MASK64(Y5, Y8, AX)
	MASK64(Y2, Y6, DX)
skipline:
	BSFQ	AX, CX
	LEAQ	(SI)(CX*1), R11	// the newline
	MOVBLZX	1(R11), BX
	CMPB	BX, $0x23
	JEQ	skippass	// a comment
	CMPB	BX, $0x0a
	JEQ	skippass	// an empty line
	LEAQ	61(DI), BX
	CMPQ	R11, BX
	JHI	skiprec		// its id would run past b
	MOVL	1(R11), BX	// the id of a vendor line
	JUDGE(skipline, skippass, skiprec, skipnext)
	POPCNTQ	DX, DX
	ADDQ	DX, R9
	ADDQ	$64, SI
	TESTQ	R10, R10
	JNZ	done		// a vendor that may be wanted, or a line to judge
	CMPQ	SI, DI
	JLS	skiploop
	JMP	done

devloop:
	VPCMPEQB	(SI), Y1, Y2
	VPCMPEQB	32(SI), Y1, Y6
	VPCMPEQB	1(SI), Y3, Y4
	VPCMPEQB	33(SI), Y3, Y7
	VPCMPEQB	2(SI), Y3, Y10	// a second tab
	VPCMPEQB	34(SI), Y3, Y11
	VPAND	Y4, Y10, Y10
	VPAND	Y7, Y11, Y11
	VPANDN	Y2, Y10, Y5	// Y5, Y8 = newline &^ two tabs after
	VPANDN	Y6, Y11, Y8
	VPOR	Y5, Y8, Y9
	VPTEST	Y9, Y9
	JNZ	devfound
	NEXTSTEP
	CMPQ	SI, DI
	JLS	devloop
	JMP	done

devfound:
	VPANDN	Y2, Y4, Y4	// lines without a tab
	VPANDN	Y6, Y7, Y7
	MASK64(Y4, Y7, R13)
	MASK64(Y5, Y8, AX)
	MASK64(Y2, Y6, DX)
devline:
	BSFQ	AX, CX
	LEAQ	(SI)(CX*1), R11	// the newline
	BTQ	CX, R13
	JCC	devdevice
	MOVBLZX	1(R11), BX
	CMPB	BX, $0x23
	JEQ	devkeep		// a comment
	CMPB	BX, $0x0a
	JEQ	devkeep		// an empty line
	JMP	devrec		// the block may end here
devkeep:
	BTRQ	CX, R13		// does not end the block
	JMP	devpass
devdevice:
	LEAQ	60(DI), BX
	CMPQ	R11, BX
	JHI	devrec
	MOVL	2(R11), BX	// the id of a device line
	JUDGE(devline, devpass, devrec, devnext)
	POPCNTQ	DX, DX
	ADDQ	DX, R9
	ADDQ	$64, SI
	TESTQ	R13, R13
	JNZ	done		// the block may have ended
	CMPQ	R10, $(const_batchCap-64)
	JHI	done
	CMPQ	SI, DI
	JLS	devloop

done:
	VZEROUPPER
short:
	MOVQ	b_base+0(FP), R8
	SUBQ	R8, SI
	MOVQ	SI, n+48(FP)
	MOVQ	R9, lines+56(FP)
	MOVQ	R10, count+64(FP)
	MOVQ	passed+72(FP), R11
	TESTQ	R11, R11
	JZ	nopass
	SUBQ	R8, R11
	MOVQ	R11, passed+72(FP)
	RET
nopass:
	MOVQ	$-1, passed+72(FP)
	RET
