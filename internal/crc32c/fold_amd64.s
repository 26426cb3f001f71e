#include "textflag.h"

// Fold constants for the Castagnoli polynomial P. Folding a 128-bit lane
// forward by D bits multiplies its first 8 bytes (the higher-degree half,
// the data being bit-reflected) by k(D+32) and its last 8 by k(D-32),
// where k(n) = bitreverse32(x^n mod P) << 1; gen_test.go derives them.
// Each is a 128-bit pair, low quadword first.
DATA k2048<>+0(SB)/8, $0x0dcb17aa4 // k(2080): four 512-bit accumulators, 256 bytes on
DATA k2048<>+8(SB)/8, $0x0b9e02b86 // k(2016)
GLOBL k2048<>(SB), RODATA|NOPTR, $16
DATA k512<>+0(SB)/8, $0x0740eef02 // k(544): one 512-bit accumulator, 64 bytes on
DATA k512<>+8(SB)/8, $0x09e4addf8 // k(480)
GLOBL k512<>(SB), RODATA|NOPTR, $16
DATA k128<>+0(SB)/8, $0x0f20c0dfe // k(160): one 128-bit lane, 16 bytes on
DATA k128<>+8(SB)/8, $0x14cd00bd6 // k(96)
GLOBL k128<>(SB), RODATA|NOPTR, $16

// func foldZ(crc uint32, p []byte) uint32
//
// foldZ continues the raw (not inverted) CRC32c state crc over p and
// returns the raw state. len(p) must be at least 256 and a multiple of 16.
//
// It XORs crc into the first 4 bytes, keeps four 512-bit accumulators
// (Z1-Z4, 256 bytes) and folds each 256 bytes forward per round, folds
// the four into Z1, then 64 bytes at a time, then Z1's four lanes into
// X1, then 16 bytes at a time. What is left, X1, has the CRC of all of p:
// two CRC32 instructions from a zero state give it.
TEXT ·foldZ(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VMOVDQU64 (SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VPXORQ    Z0, Z0, Z0
	VMOVD     AX, X0
	VPXORQ    Z0, Z1, Z1
	ADDQ      $256, SI
	SUBQ      $256, CX

	VBROADCASTI32X4 k2048<>(SB), Z0
	CMPQ CX, $256
	JB   fold4

	PCALIGN $16
loop256:
	VPCLMULQDQ $0x00, Z0, Z1, Z5
	VPCLMULQDQ $0x11, Z0, Z1, Z1
	VPCLMULQDQ $0x00, Z0, Z2, Z6
	VPCLMULQDQ $0x11, Z0, Z2, Z2
	VPCLMULQDQ $0x00, Z0, Z3, Z7
	VPCLMULQDQ $0x11, Z0, Z3, Z3
	VPCLMULQDQ $0x00, Z0, Z4, Z8
	VPCLMULQDQ $0x11, Z0, Z4, Z4
	VPTERNLOGD $0x96, (SI), Z5, Z1
	VPTERNLOGD $0x96, 64(SI), Z6, Z2
	VPTERNLOGD $0x96, 128(SI), Z7, Z3
	VPTERNLOGD $0x96, 192(SI), Z8, Z4
	ADDQ       $256, SI
	SUBQ       $256, CX
	CMPQ       CX, $256
	JAE        loop256

fold4:
	VBROADCASTI32X4 k512<>(SB), Z0
	VPCLMULQDQ      $0x00, Z0, Z1, Z5
	VPCLMULQDQ      $0x11, Z0, Z1, Z1
	VPTERNLOGD      $0x96, Z2, Z5, Z1
	VPCLMULQDQ      $0x00, Z0, Z1, Z5
	VPCLMULQDQ      $0x11, Z0, Z1, Z1
	VPTERNLOGD      $0x96, Z3, Z5, Z1
	VPCLMULQDQ      $0x00, Z0, Z1, Z5
	VPCLMULQDQ      $0x11, Z0, Z1, Z1
	VPTERNLOGD      $0x96, Z4, Z5, Z1
	CMPQ            CX, $64
	JB              fold1

loop64:
	VPCLMULQDQ $0x00, Z0, Z1, Z5
	VPCLMULQDQ $0x11, Z0, Z1, Z1
	VPTERNLOGD $0x96, (SI), Z5, Z1
	ADDQ       $64, SI
	SUBQ       $64, CX
	CMPQ       CX, $64
	JAE        loop64

fold1:
	VEXTRACTI32X4 $1, Z1, X2
	VEXTRACTI32X4 $2, Z1, X3
	VEXTRACTI32X4 $3, Z1, X4
	VMOVDQU       k128<>(SB), X0
	VPCLMULQDQ    $0x00, X0, X1, X5
	VPCLMULQDQ    $0x11, X0, X1, X1
	VPXOR         X5, X1, X1
	VPXOR         X2, X1, X1
	VPCLMULQDQ    $0x00, X0, X1, X5
	VPCLMULQDQ    $0x11, X0, X1, X1
	VPXOR         X5, X1, X1
	VPXOR         X3, X1, X1
	VPCLMULQDQ    $0x00, X0, X1, X5
	VPCLMULQDQ    $0x11, X0, X1, X1
	VPXOR         X5, X1, X1
	VPXOR         X4, X1, X1
	CMPQ          CX, $16
	JB            done

loop16:
	VPCLMULQDQ $0x00, X0, X1, X5
	VPCLMULQDQ $0x11, X0, X1, X1
	VPXOR      X5, X1, X1
	VPXOR      (SI), X1, X1
	ADDQ       $16, SI
	SUBQ       $16, CX
	CMPQ       CX, $16
	JAE        loop16

done:
	VMOVQ   X1, AX
	VPEXTRQ $1, X1, BX
	VZEROUPPER
	XORL    DX, DX
	CRC32Q  AX, DX
	CRC32Q  BX, DX
	MOVL    DX, ret+32(FP)
	RET
