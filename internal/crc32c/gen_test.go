package crc32c

import (
	"math/bits"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// xnmod returns x^n mod P, P = x^32 + poly in normal form (bit i is the
// coefficient of x^i).
func xnmod(n int, poly uint32) uint32 {
	r := uint32(1)
	for range n {
		top := r & 0x80000000
		r <<= 1
		if top != 0 {
			r ^= poly
		}
	}
	return r
}

// foldConstant is k(n) of fold_amd64.s: bit-reflected x^n mod P, shifted
// left once (a carry-less product of two reflected values comes out one
// bit short of its place).
func foldConstant(n int, poly uint32) uint64 {
	return uint64(bits.Reverse32(xnmod(n, poly))) << 1
}

// TestFoldConstantsDerivation checks the derivation against constants
// known from elsewhere: those of hash/crc32's IEEE fold (crc32_amd64.s,
// 512-bit and 128-bit distances).
func TestFoldConstantsDerivation(t *testing.T) {
	const ieee = 0x04c11db7
	for n, want := range map[int]uint64{544: 0x154442bd4, 480: 0x1c6e41596, 160: 0x1751997d0, 96: 0x0ccaa009e} {
		if got := foldConstant(n, ieee); got != want {
			t.Errorf("IEEE k(%d) = %#x, hash/crc32 has %#x", n, got, want)
		}
	}
}

// TestFoldConstants checks every "$value // k(n)" in fold_amd64.s
// against the derivation for the Castagnoli polynomial.
func TestFoldConstants(t *testing.T) {
	src, err := os.ReadFile("fold_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	const castagnoli = 0x1edc6f41
	ms := regexp.MustCompile(`\$(0x[0-9a-f]+) // k\((\d+)\)`).FindAllSubmatch(src, -1)
	if len(ms) != 6 {
		t.Fatalf("found %d constants in fold_amd64.s, want 6", len(ms))
	}
	for _, m := range ms {
		v, _ := strconv.ParseUint(string(m[1]), 0, 64)
		n, _ := strconv.Atoi(string(m[2]))
		if want := foldConstant(n, castagnoli); v != want {
			t.Errorf("k(%d) = %#x in fold_amd64.s, derived %#x", n, v, want)
		}
	}
}
