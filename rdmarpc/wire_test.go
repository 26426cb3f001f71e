package rdmarpc

import "encoding/binary"

// wire builds expected byte vectors word by word, independently of the
// encoder under test.
type wire struct{ b []byte }

func (w *wire) u32(vs ...uint32) *wire {
	for _, v := range vs {
		w.b = binary.BigEndian.AppendUint32(w.b, v)
	}
	return w
}

func (w *wire) u64(v uint64) *wire {
	w.b = binary.BigEndian.AppendUint64(w.b, v)
	return w
}

// seg appends HLOO.
func (w *wire) seg(s Segment) *wire { return w.u32(s.Handle, s.Length).u64(s.Offset) }

// read appends one Read list entry: 1 PHLOO.
func (w *wire) read(pos uint32, s Segment) *wire { return w.u32(1, pos).seg(s) }

// chunk appends a counted array of segments: N HLOO...
func (w *wire) chunk(segs ...Segment) *wire {
	w.u32(uint32(len(segs)))
	for _, s := range segs {
		w.seg(s)
	}
	return w
}

func (w *wire) bytes() []byte { return w.b }

func fixed(xid, vers, credit uint32, p Proc) *wire {
	return new(wire).u32(xid, vers, credit, uint32(p))
}

// seg returns a distinct, recognisable segment for index i.
func seg(i int) Segment {
	return Segment{Handle: 0xab000000 + uint32(i), Length: 4096 + uint32(i), Offset: 0x7f0000000000 + uint64(i)<<12}
}

// typicalHeader is the benchmark message: an RDMA_MSG call with one Read
// chunk of 2 segments (an NFS WRITE payload), one Write chunk of 2
// segments and a 1-segment Reply chunk.
func typicalHeader(h *Header) {
	h.Init(0x5eed0001, 128, ProcMsg)
	h.AppendReadChunk(148, seg(0), seg(1))
	h.AppendWriteChunk(seg(2), seg(3))
	h.SetReplyChunk(seg(4))
}

func typicalWire() []byte {
	return fixed(0x5eed0001, 1, 128, ProcMsg).
		read(148, seg(0)).read(148, seg(1)).u32(0).
		u32(1).chunk(seg(2), seg(3)).u32(0).
		u32(1).chunk(seg(4)).bytes()
}
