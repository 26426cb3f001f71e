package verbstest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// fill writes a pseudo-random pattern derived from seed into b, so two
// different transfers never carry the same bytes and a misplaced chunk is
// caught.
func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
}

// pattern returns a fresh slice filled with fill(seed).
func pattern(n int, seed uint64) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

// diff describes the first difference between got and want, or "" when
// they are equal.
func diff(what string, got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	first, count := -1, 0
	for i := range got {
		if got[i] != want[i] {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	end := min(first+16, len(got))
	return fmt.Sprintf("%s: %d of %d bytes differ, first at offset %d: got % x, want % x",
		what, count, len(got), first, got[first:end], want[first:end])
}

// same fails the test when got and want differ.
func same(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if d := diff(what, got, want); d != "" {
		t.Fatal(d)
	}
}

// paddedEqual reports whether got is sent, or (padded) sent followed only
// by zero bytes, as a CM with fixed-size private data delivers it.
func paddedEqual(got, sent []byte, padded bool) bool {
	if !padded {
		return bytes.Equal(got, sent)
	}
	if len(got) < len(sent) || !bytes.Equal(got[:len(sent)], sent) {
		return false
	}
	for _, b := range got[len(sent):] {
		if b != 0 {
			return false
		}
	}
	return true
}
