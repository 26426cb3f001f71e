package rdmarpc

import (
	"slices"
	"testing"
)

func TestReadChunks(t *testing.T) {
	var h Header
	in := fixed(1, 1, 1, ProcNoMsg).
		read(0, seg(0)).read(0, seg(1)).read(0, seg(2)). // Position-Zero chunk, 3 segments
		read(120, seg(3)).                               // data chunk
		read(400, seg(4)).read(400, seg(5)).             // data chunk, 2 segments
		u32(0, 0, 0).bytes()
	if _, err := h.Decode(in, Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := h.Reads.ChunkCount(); got != 3 {
		t.Fatalf("ChunkCount = %d, want 3", got)
	}

	type chunk struct {
		pos  uint32
		segs []Segment
		len  uint64
	}
	want := []chunk{
		{0, []Segment{seg(0), seg(1), seg(2)}, 3*4096 + 0 + 1 + 2},
		{120, []Segment{seg(3)}, 4096 + 3},
		{400, []Segment{seg(4), seg(5)}, 2*4096 + 4 + 5},
	}
	var got []chunk
	for c := range h.Reads.Chunks() {
		var segs []Segment
		for _, s := range c.Segments {
			if s.Position != c.Position {
				t.Fatalf("segment Position %d in chunk at %d", s.Position, c.Position)
			}
			segs = append(segs, s.Segment)
		}
		got = append(got, chunk{c.Position, segs, c.Len()})
	}
	if !slices.EqualFunc(got, want, func(a, b chunk) bool {
		return a.pos == b.pos && a.len == b.len && slices.Equal(a.segs, b.segs)
	}) {
		t.Fatalf("Chunks = %+v\nwant %+v", got, want)
	}

	// The cursor form visits the same chunks and ends at len.
	i, n := 0, 0
	for i < len(h.Reads) {
		var c ReadChunk
		c, i = h.Reads.NextChunk(i)
		if c.Position != want[n].pos || c.Len() != want[n].len {
			t.Fatalf("NextChunk %d = %+v", n, c)
		}
		n++
	}
	if c, j := h.Reads.NextChunk(len(h.Reads)); len(c.Segments) != 0 || j != len(h.Reads) {
		t.Fatalf("NextChunk past end = %+v, %d", c, j)
	}

	// Stop early.
	n = 0
	for range h.Reads.Chunks() {
		n++
		break
	}
	if n != 1 {
		t.Fatal("break did not stop the iterator")
	}

	pz, ok := h.PositionZero()
	if !ok || pz.Position != 0 || len(pz.Segments) != 3 {
		t.Fatalf("PositionZero = %+v, %v", pz, ok)
	}
	// A chunk's segments are capped: appending to one cannot clobber the
	// next chunk.
	_ = append(pz.Segments, ReadSegment{})
	if h.Reads[3].Segment != seg(3) {
		t.Fatal("append to a chunk overwrote the Read list")
	}
	if data := h.Reads.DataChunks(); len(data) != 3 || data[0].Position != 120 {
		t.Fatalf("DataChunks = %+v", data)
	}
	if h.Reads.Bytes() != 6*4096+15 {
		t.Fatalf("Bytes = %d", h.Reads.Bytes())
	}
}

func TestReadListNoPositionZero(t *testing.T) {
	var h Header
	h.Init(1, 1, ProcMsg)
	h.AppendReadChunk(148, seg(0))
	if _, ok := h.PositionZero(); ok {
		t.Fatal("PositionZero found in a list without one")
	}
	if d := h.Reads.DataChunks(); len(d) != 1 {
		t.Fatalf("DataChunks = %v", d)
	}
	var empty ReadList
	if empty.ChunkCount() != 0 || len(empty.DataChunks()) != 0 {
		t.Fatal("empty list has chunks")
	}
	for range empty.Chunks() {
		t.Fatal("empty list yielded a chunk")
	}
}

// RDMA_MSG with a Position-Zero Read chunk is left to the engine: the
// codec accepts it (early Linux clients sent Long calls this way).
func TestMsgWithPositionZeroAccepted(t *testing.T) {
	var h Header
	in := fixed(1, 1, 1, ProcMsg).read(0, seg(0)).u32(0, 0, 0).bytes()
	if _, err := h.Decode(in, Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.PositionZero(); !ok {
		t.Fatal("Position-Zero chunk not reported")
	}
}

// Zero-length segments are legal in every list.
func TestZeroLengthSegmentsAccepted(t *testing.T) {
	var h Header
	z := Segment{Handle: 5, Length: 0, Offset: 0x10}
	in := fixed(1, 1, 1, ProcMsg).read(8, z).u32(0).u32(1).chunk(z, z).u32(0).u32(1).chunk(z).bytes()
	if _, err := h.Decode(in, Limits{}); err != nil {
		t.Fatal(err)
	}
	if h.Reads[0].Segment != z || h.Writes[0].Len() != 0 || h.Reply.Len() != 0 {
		t.Fatalf("decoded %v", &h)
	}
}
