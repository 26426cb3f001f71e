package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

var stdTable = crc32.MakeTable(crc32.Castagnoli)

// TestUpdateMatchesHashCRC32 checks Update against hash/crc32 on every
// length up to 4 KiB (both sides of foldMin and of each fold stage: 16,
// 64, 256 bytes), at every alignment mod 64, from random states, and on
// buffers of up to 1 MiB.
func TestUpdateMatchesHashCRC32(t *testing.T) {
	t.Logf("folding: %v (foldMin %d)", Folding(), foldMin)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	check := func(off, n int, crc uint32) {
		t.Helper()
		p := buf[off : off+n]
		if got, want := Update(crc, p), crc32.Update(crc, stdTable, p); got != want {
			t.Fatalf("Update(%#x, %d bytes at offset %d) = %#x, hash/crc32 says %#x", crc, n, off, got, want)
		}
	}
	for n := 0; n <= 4096; n++ {
		check(n%64, n, rng.Uint32())
	}
	for _, n := range []int{8191, 8192, 65535, 65536, 65536 + 4, 1 << 20} {
		for off := range 17 {
			check(off, n, rng.Uint32())
		}
	}
}

// TestUpdateChains checks that a CRC continued across any split of a
// buffer is the CRC of the whole, as MPA's header-then-payload CRC is.
func TestUpdateChains(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 3000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	want := crc32.Checksum(buf, stdTable)
	for split := 0; split <= len(buf); split += 7 {
		if got := Update(Update(0, buf[:split]), buf[split:]); got != want {
			t.Fatalf("split at %d: %#x, want %#x", split, got, want)
		}
	}
}

// TestFoldZ calls the fold itself, when this CPU has it, on the lengths
// it is specified for (multiples of 16 from 256), so a wrong stage shows
// even where Update's dispatch would not reach it.
func TestFoldZ(t *testing.T) {
	if !Folding() {
		t.Skip("no AVX-512 VPCLMULQDQ on this CPU: Update is hash/crc32")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 4096+256)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for n := 256; n <= 4096+256; n += 16 {
		crc := rng.Uint32()
		got := ^foldZ(^crc, buf[:n])
		if want := crc32.Update(crc, stdTable, buf[:n]); got != want {
			t.Fatalf("foldZ over %d bytes: %#x, want %#x", n, got, want)
		}
	}
}

func FuzzUpdate(f *testing.F) {
	f.Add(uint32(0), make([]byte, 600), 0)
	f.Add(uint32(0xffffffff), make([]byte, 1500), 700)
	f.Fuzz(func(t *testing.T, crc uint32, p []byte, split int) {
		if split < 0 || split > len(p) {
			split = len(p) / 2
		}
		want := crc32.Update(crc, stdTable, p)
		if got := Update(crc, p); got != want {
			t.Fatalf("Update(%#x, %d bytes) = %#x, want %#x", crc, len(p), got, want)
		}
		if got := Update(Update(crc, p[:split]), p[split:]); got != want {
			t.Fatalf("Update split at %d of %d: %#x, want %#x", split, len(p), got, want)
		}
	})
}
