package rdmarpc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// randomHeader builds a random header that Decode must accept under the
// default Limits: Read chunks in ascending Position order, and an
// RDMA_NOMSG always carries a Position-Zero chunk or a Reply chunk.
// Counts go past the Header's inline storage so both paths are covered.
func randomHeader(r *rand.Rand, h *Header) {
	procs := []Proc{ProcMsg, ProcNoMsg, ProcError}
	h.Init(r.Uint32(), r.Uint32N(256), procs[r.IntN(len(procs))])
	randSeg := func() Segment {
		return Segment{Handle: r.Uint32(), Length: r.Uint32N(1 << 17), Offset: r.Uint64()}
	}
	if h.Proc == ProcError {
		if r.IntN(2) == 0 {
			h.SetErrVers(r.Uint32N(4), r.Uint32N(4))
		} else {
			h.SetErrChunk()
		}
		return
	}
	pos := uint32(0)
	if h.Proc == ProcMsg || r.IntN(3) == 0 {
		pos = 4 * (1 + r.Uint32N(64)) // no Position-Zero chunk
	}
	for range r.IntN(6) {
		for range 1 + r.IntN(6) {
			h.AppendReadSegment(pos, randSeg())
		}
		pos += 4 * (1 + r.Uint32N(1000))
	}
	for range r.IntN(DefaultMaxWriteChunks + 1) {
		segs := make([]Segment, r.IntN(5))
		for i := range segs {
			segs[i] = randSeg()
		}
		h.AppendWriteChunk(segs...)
	}
	_, pz := h.PositionZero()
	if r.IntN(2) == 0 || (h.Proc == ProcNoMsg && !pz) {
		segs := make([]Segment, r.IntN(4))
		for i := range segs {
			segs[i] = randSeg()
		}
		h.SetReplyChunk(segs...)
	}
}

// TestRoundTripProperty: for random valid headers, Decode(Encode(h)) == h,
// Encode(Decode(b)) == b, the length is EncodedLen, and the bytes after
// the header are left alone.
func TestRoundTripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(8166, 8797))
	var h, g Header
	buf := make([]byte, 8192)
	out := make([]byte, 8192)
	for i := range 20000 {
		randomHeader(r, &h)
		n, err := h.Encode(buf)
		if err != nil {
			t.Fatalf("#%d Encode(%v): %v", i, &h, err)
		}
		if n != h.EncodedLen() {
			t.Fatalf("#%d Encode wrote %d, EncodedLen %d", i, n, h.EncodedLen())
		}
		for j := n; j < n+8; j++ {
			buf[j] = byte(r.Uint32()) // bytes after the header must not matter
		}
		m, err := g.Decode(buf[:n+8], Limits{})
		if err != nil {
			t.Fatalf("#%d Decode(%v): %v", i, &h, err)
		}
		if m != n || !g.Equal(&h) {
			t.Fatalf("#%d round trip: n=%d m=%d\n got %v\nwant %v", i, n, m, &g, &h)
		}
		k, err := g.Encode(out)
		if err != nil || !bytes.Equal(out[:k], buf[:n]) {
			t.Fatalf("#%d re-encode differs: %v", i, err)
		}
	}
}

// TestRandomCorruptionProperty: flipping words of valid headers never
// panics, and every error is one of the three documented kinds.
func TestRandomCorruptionProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(5666, 8267))
	var h, g Header
	buf := make([]byte, 8192)
	tight := Limits{MaxReadSegments: 4, MaxReadChunks: 2, MaxWriteChunks: 2, MaxSegmentsPerChunk: 3, MaxChunkBytes: 200000}
	for range 20000 {
		randomHeader(r, &h)
		n, _ := h.Encode(buf)
		b := buf[:n]
		for range 1 + r.IntN(3) {
			if len(b) < 4 {
				break
			}
			w := 4 * r.IntN(len(b)/4)
			switch r.IntN(3) {
			case 0:
				b[w+3] = byte(r.IntN(4)) // small values hit discriminators
				b[w], b[w+1], b[w+2] = 0, 0, 0
			case 1:
				b[w+r.IntN(4)] ^= 1 << r.IntN(8)
			case 2:
				b = b[:r.IntN(len(b)+1)]
			}
		}
		for _, lim := range []Limits{{}, tight} {
			_, err := g.Decode(b, lim)
			if err == nil {
				continue
			}
			if !errors.Is(err, ErrShort) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrChunk) {
				t.Fatalf("undocumented error %T: %v", err, err)
			}
		}
	}
}
