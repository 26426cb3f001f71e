package crc32c

import "golang.org/x/sys/cpu"

// foldMin is the shortest buffer Update folds, 0 when the CPU cannot.
// Below it hash/crc32's CRC32 instruction streams win: the fold has a
// fixed cost (four 64-byte loads, then reducing 512 bits to 32), and
// the benchmarks (BenchmarkUpdate) put the crossing near 512 bytes.
var foldMin = func() int {
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE42 {
		return 512
	}
	return 0
}()

// foldLen is how much of a buffer of n bytes Update folds: all but the
// last n%16 bytes, or nothing.
func foldLen(n int) int {
	if foldMin == 0 || n < foldMin {
		return 0
	}
	return n &^ 15
}

// foldZ continues a raw (not inverted) CRC32c state over p, at least
// 256 bytes and a multiple of 16, and returns the raw state (fold_amd64.s).
//
//go:noescape
func foldZ(crc uint32, p []byte) uint32
