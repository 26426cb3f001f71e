package rdmarpc

import "testing"

// Which rkey a reply may invalidate: the one every chunk segment of the
// call names, as svc_rdma_get_inv_rkey decides; none when the call has no
// chunks or names several.
func TestInvalidateRKey(t *testing.T) {
	seg := func(rkey uint32) Segment { return Segment{Handle: rkey, Length: 4096, Offset: 0x1000} }
	for _, tc := range []struct {
		name  string
		build func(h *Header)
		rkey  uint32
		ok    bool
	}{
		{"no chunks", func(h *Header) {}, 0, false},
		{"one Write chunk", func(h *Header) { h.AppendWriteChunk(seg(7), seg(7)) }, 7, true},
		{"Read chunk", func(h *Header) { h.AppendReadChunk(96, seg(9)) }, 9, true},
		{"Reply chunk only", func(h *Header) { h.SetReplyChunk(seg(5)) }, 5, true},
		{"Read, Write and Reply, one rkey", func(h *Header) {
			h.AppendReadChunk(96, seg(3))
			h.AppendWriteChunk(seg(3))
			h.SetReplyChunk(seg(3))
		}, 3, true},
		{"two rkeys in a Write chunk", func(h *Header) { h.AppendWriteChunk(seg(3), seg(4)) }, 0, false},
		{"Write and Reply chunks differ", func(h *Header) {
			h.AppendWriteChunk(seg(3))
			h.SetReplyChunk(seg(4))
		}, 0, false},
		{"Read chunks differ", func(h *Header) {
			h.AppendReadChunk(96, seg(3))
			h.AppendReadChunk(200, seg(4))
		}, 0, false},
	} {
		var h Header
		h.Init(1, 1, ProcMsg)
		tc.build(&h)
		rkey, ok := invalidateRKey(&h)
		if rkey != tc.rkey || ok != tc.ok {
			t.Errorf("%s: invalidateRKey = %d, %v; want %d, %v", tc.name, rkey, ok, tc.rkey, tc.ok)
		}
	}
}
