// Package crc32c computes CRC32c (the Castagnoli polynomial of RFC 3385,
// iSCSI and MPA, RFC 5044 section 6.5) as hash/crc32 does, faster on
// large buffers where the CPU has 512-bit carry-less multiply.
//
// hash/crc32 computes CRC32c with the SSE4.2 CRC32 instruction over three
// interleaved streams. That runs at about 25 GB/s on data in cache but at
// about 9 GB/s on data that is not, which is what a relay's payload is by
// the time its MPA CRC is taken (measured on an AMD EPYC: 64 KiB pieces
// of a 256 MiB buffer). On amd64 with AVX-512 VPCLMULQDQ, Update instead
// folds the buffer 256 bytes at a time with carry-less multiplies (the
// method of Intel's "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction", with four 512-bit accumulators) and reduces
// the last 128 bits with two CRC32 instructions, which streams memory
// at about the speed of a copy. Everything else is hash/crc32.
//
// Files:
//
//	crc32c.go        Update, the dispatch
//	fold_amd64.go    when folding is used (CPU features, minimum length)
//	fold_amd64.s     the fold (foldZ)
//	fold_other.go    no fold on other architectures
//	gen_test.go      derives the fold constants and checks the ones in fold_amd64.s
package crc32c

import "hash/crc32"

var table = crc32.MakeTable(crc32.Castagnoli)

// Update returns the CRC32c of p continued from crc, the value a previous
// Update (or 0) returned: crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), p).
func Update(crc uint32, p []byte) uint32 {
	if n := foldLen(len(p)); n > 0 {
		crc = ^foldZ(^crc, p[:n])
		p = p[n:]
	}
	return crc32.Update(crc, table, p)
}

// Folding reports whether Update uses the carry-less multiply fold on
// this machine.
func Folding() bool { return foldMin > 0 }

// Impl names what computes Update's CRCs on this machine, for the
// gateway's startup log: "avx512-vpclmulqdq" or "hash/crc32".
func Impl() string {
	if Folding() {
		return "avx512-vpclmulqdq"
	}
	return "hash/crc32"
}
