package rdmarpc

import "testing"

// ReplyHeaderMax is the size of the header a responder puts before an
// inline reply that returns every offered Write chunk with its segment
// count (RFC 8166 §3.4.6), as encoded by the codec.
func TestReplyHeaderMax(t *testing.T) {
	for _, rooms := range [][]int{nil, {0}, {4096}, {1 << 20, 0, 8192}, {1, 2, 3, 4, 5, 6, 7, 8}} {
		p := ReplyPlan{WriteChunks: rooms}
		var h Header
		h.Init(1, 32, ProcMsg)
		for _, r := range rooms {
			if r == 0 {
				h.AppendWriteChunk()
			} else {
				h.AppendWriteChunk(Segment{Handle: 1, Length: uint32(r), Offset: 1})
			}
		}
		if got, want := p.ReplyHeaderMax(), h.EncodedLen(); got != want {
			t.Errorf("rooms %v: ReplyHeaderMax %d, the echoed header encodes to %d", rooms, got, want)
		}
	}
	if got := (&ReplyPlan{}).ReplyHeaderMax(); got != 28 {
		t.Errorf("no Write chunk: %d, want 28", got)
	}
}
