package rdmarpc

import "github.com/rdmagw/rdmagw/xdr"

// SetReplyChunk sets the Reply chunk to a copy of segs (zero segments is
// legal on the wire but offers no room).
func (h *Header) SetReplyChunk(segs ...Segment) {
	w := WriteChunk(h.allocSegs(len(segs)))
	copy(w, segs)
	h.Reply, h.HasReply = w, true
}

// ClearReplyChunk removes the Reply chunk.
func (h *Header) ClearReplyChunk() { h.Reply, h.HasReply = nil, false }

// The Reply chunk on the wire is optional-data holding one counted array:
//
//	0                       (absent)
//	1 | N | HLOO x N        (present)
func (h *Header) decodeReplyChunk(d *xdr.Decoder, lim *Limits) error {
	more, err := d.Optional()
	if err != nil {
		return h.truncated(InReplyChunk, d.Offset(), -1, err)
	}
	if !more {
		return nil
	}
	w, err := h.decodeWriteChunk(d, lim, InReplyChunk, -1)
	if err != nil {
		return err
	}
	h.Reply, h.HasReply = w, true
	return nil
}

// encodeReplyChunk writes the optional Reply chunk (present when has).
func encodeReplyChunk(e *xdr.Encoder, has bool, w WriteChunk) {
	e.PutOptional(has)
	if has {
		encodeWriteChunk(e, w)
	}
}
