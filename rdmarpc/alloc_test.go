package rdmarpc

import "testing"

// TestDecodeAllocatesNothing checks the hot path at the edge of the
// Header's inline storage: 16 Read segments, 8 Write chunks and 16
// Write/Reply segments.
func TestDecodeAllocatesNothing(t *testing.T) {
	var full Header
	full.Init(1, 64, ProcNoMsg)
	for i := range inlineReadSegments {
		full.AppendReadSegment(uint32(i/4)*8, seg(i))
	}
	for i := range inlineWriteChunks {
		full.AppendWriteChunk(seg(i), seg(i+100)) // 8 x 2 = 16 segments...
	}
	full.ClearReplyChunk() // ...so the Reply chunk must be empty
	full.SetReplyChunk()
	fullWire := make([]byte, full.EncodedLen())
	if _, err := full.Encode(fullWire); err != nil {
		t.Fatal(err)
	}

	for name, in := range map[string][]byte{"typical": typicalWire(), "inline capacity": fullWire} {
		var h Header
		var err error
		allocs := testing.AllocsPerRun(200, func() { _, err = h.Decode(in, Limits{}) })
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Errorf("%s: Decode allocates %.1f times per call", name, allocs)
		}
		out := make([]byte, len(in))
		allocs = testing.AllocsPerRun(200, func() { _, err = h.Encode(out) })
		if err != nil || allocs != 0 {
			t.Errorf("%s: Encode allocates %.1f times per call (err %v)", name, allocs, err)
		}
	}

	var h Header
	allocs := testing.AllocsPerRun(200, func() {
		typicalHeader(&h)
		for c := range h.Reads.Chunks() {
			_ = c.Len()
		}
		_, _ = h.PositionZero()
	})
	if allocs != 0 {
		t.Errorf("building and iterating allocates %.1f times per call", allocs)
	}

	buf := make([]byte, 32)
	p := PrivateData{RemoteInvalidate: true, MaxSendSize: 4096, MaxRecvSize: 4096}
	allocs = testing.AllocsPerRun(200, func() {
		p.Encode(buf)
		ParsePrivateData(buf)
		EncodeErrVers(buf, 1, 2, 3, 1, 1)
	})
	if allocs != 0 {
		t.Errorf("private data / error encoders allocate %.1f times per call", allocs)
	}
}
