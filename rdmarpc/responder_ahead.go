package rdmarpc

import (
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/verbs"
)

// Writing a reply's DDP item into its Write chunk ahead of the reply
// (cut-through). A handler that receives a large item (a READ's data)
// from somewhere slow, a byte stream say, can post the RDMA Writes of the
// part already received while the rest is still arriving: the Writes
// overlap the receive, and the provider reads the data (iwarp: computes
// the MPA CRC over it) while it is still in the cache of the core that
// received it, rather than after a whole 1 MiB reply has passed through
// (unless earlier replies queued on the connection hold the provider's
// transmit up anyway: README, "Cut-through").
//
//	handler:  receive 256K ─ WriteAhead ─ receive 256K ─ WriteAhead ─ ... ─ Reply
//	wire:                    [Write ..]                [Write ..]         [Writes of the rest] Send
//
// Each WriteAhead is a chain of its own, its last Write signaled and
// tagged as a send context's completion, so sendDone retires it like a
// reply: its send-queue slots and the reference it holds on the buffer
// come back when the Writes are done, whatever becomes of the reply.
// The reply's Piece.Written tells Reply which leading bytes of the item
// are in the chunk already; Reply writes the rest and returns the
// chunk's segment lengths for the whole item.
//
// What it costs the §6.4.1 rule: nothing. WriteAhead pairs item k with
// Write chunk k by the same rule as pairReply (itemChunk), and refuses
// (ErrNotAhead, nothing posted) an item that would not go there, so an
// item larger than its chunk is still answered ERR_CHUNK before a byte
// of it is written. What is new is that a reply can be refused after
// Writes into its Write chunk, when its inline part turns out to fit
// neither inline nor the Reply chunk, or the handler answers the call
// otherwise (Drop, an error reply): the chunk's memory was the call's
// own, registered for this reply only, and the requester reads it only
// after a reply that says it was written (RFC 8166 §3.4.6: the Write
// list in the reply gives the lengths written), so what it holds then is
// not data to it.

// ErrNotAhead: WriteAhead posted nothing because the item does not pair
// with a Write chunk with room for it (the reply sends it as Reply
// would: inline, or ERR_CHUNK), the call is answered already, or, within
// ServeCall, no send resources were free at once; the reply then carries
// the part.
var ErrNotAhead = errors.New("rdmarpc: item not written ahead")

// itemChunk is the Write chunk that item k of n bytes goes into (RFC
// 8267 §6.4.1): chunk k when the call offered one with room (k), none
// (-1) when the call offered no chunk k or an empty one, and an error
// when chunk k is smaller than the item.
func itemChunk(ch *Header, k, n int) (int, error) {
	if k >= len(ch.Writes) || ch.Writes[k].Len() == 0 {
		return -1, nil
	}
	if uint64(n) > ch.Writes[k].Len() {
		return k, &roomError{chunk: k, need: uint64(n), err: fmt.Errorf("%w: item %d is %d bytes, Write chunk %d offers %d",
			errWriteChunkTooSmall, k, n, k, ch.Writes[k].Len())}
	}
	return k, nil
}

// WriteAhead posts RDMA Writes of data, which is bytes [off,
// off+len(data)) of the reply's item k (the k-th Item piece of the
// message Reply will get) of n bytes, into the call's Write chunk k. data
// lies in buf, which WriteAhead holds a reference on until the Writes
// are done. The reply's Item piece must then say, in Written, how many
// leading bytes were written ahead: the parts must be given in order,
// from off 0, each starting where the last ended.
//
// It returns ErrNotAhead when item k does not go into a Write chunk (no
// chunk k, an empty one, one smaller than n) or the call was answered,
// and the connection's error when it has ended. It waits for send
// resources as Reply does; from within ServeCall, where it must not (as
// for Reply), it posts only what it finds free at once, else returns
// ErrNotAhead and leaves the part to the reply.
func (call *Call) WriteAhead(k, n, off int, data []byte, buf *Buffer) error {
	c := call.conn
	if call.state.Load() != callHandler || len(data) == 0 {
		return ErrNotAhead
	}
	if ck, err := itemChunk(&call.hdr, k, n); ck < 0 || err != nil || off+len(data) > n {
		return ErrNotAhead
	}
	wait := c.delivering.Load() != call
	s := c.getSend(wait)
	if s == nil {
		if c.isDead() {
			return c.closedErr()
		}
		return ErrNotAhead
	}
	s.src = append(s.src[:0], verbs.SGE{Buf: data, LKey: buf.LKey()})
	s.appendWrites(s.src, call.hdr.Writes[k], nil, off, c.maxSGE)
	last := &s.wrs[len(s.wrs)-1]
	last.ID, last.Signal = wrSend|uint64(s.idx), true
	s.itemWRs = len(s.wrs)
	s.link()
	if !c.sq.takeOrTry(s.slots, wait, c.dead) {
		c.putSend(s)
		if c.isDead() {
			return c.closedErr()
		}
		return ErrNotAhead
	}
	buf.Ref()
	s.own(buf)
	w := s.work()
	if err := c.postChain(s, false); err != nil {
		return err
	}
	w.report(c.work)
	c.met.WrittenAhead(len(data))
	return nil
}
