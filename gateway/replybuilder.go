package gateway

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// replyBuilder turns one backend reply record into an rdmarpc.Message
// without gathering it: the bytes of the RPC reply land in registered
// pool buffers straight from the socket, each DDP-eligible result body
// (READ data, READLINK path) in a buffer of its own as an Item piece,
// everything else in inline buffers around them:
//
//	[ inline: RPC reply header, READ3resok up to the data length ]
//	[ item: the READ data, in a pool buffer, the engine RDMA-writes it ]
//	[ inline: whatever follows the data's XDR pad ]
//
// The inline bytes are copied once (from the read-ahead buffer or the
// socket into registered memory, where the engine can Send or RDMA-Write
// them); item bodies are received from the socket into their buffer.
// A replyBuilder is owned by one backend reader goroutine.
type replyBuilder struct {
	rr    *tcprpc.RecordReader
	pool  *rdmarpc.Pool
	quota *rdmarpc.Quota // the connection's connections.max_reply_memory
	// localWait is set while get waits for memory: the reader is held up
	// on our side, not by the server (the backend watchdog skips it).
	localWait *atomic.Bool
	peekMax   int
	done      <-chan struct{} // closed when the backend connection is going away
	timer     *time.Timer

	msg  *rdmarpc.Message
	cur  *rdmarpc.Buffer // the inline buffer being filled
	used int             // bytes of cur filled
	// curInMsg: a piece of the message lies in cur, so the message owns
	// the reference Get gave us (a buffer shared by several pieces holds
	// one reference: Message.ReleaseBuffers releases it once).
	curInMsg bool
	// open is the index of the inline piece that ends at cur.Bytes[used]
	// and can grow in place, or -1.
	open int
	walk ulb.Walker
	// expectItems: DDP-eligible results may still follow, so inline
	// buffers are taken small.
	expectItems bool
	// fallback is set when DDP had to be given up for this reply.
	fallback bool
	// refused is set when DDP had to be given up although the client
	// offered a Write chunk the result may need: RFC 8267 §6.4.1 says a
	// DDP-eligible result MUST then go in the chunk, so the reply is not
	// sent; the call is answered SYSTEM_ERR instead (session.failCall).
	// The record is still read to its end.
	refused error
	// lim is what the gateway can carry: the transfer sizes a reply
	// advertises are lowered to it (nil: left alone).
	lim *ulb.IOLimits
	// capped counts the values lowered in the last reply.
	capped int
}

// errConnGoing: the backend connection ended while waiting for buffers.
var errConnGoing = errors.New("gateway: backend connection closing")

// build reads the current record, whose first hdrLen bytes are the RPC
// reply header just decoded from a Peek, into pc.reply. walk says whether
// to look for DDP-eligible results. On error the message's buffers have
// been released and the message is empty.
func (b *replyBuilder) build(pc *pendingCall, hdrLen int, walk bool) error {
	b.msg = &pc.reply
	b.msg.Reset()
	b.msg.XID = pc.xid
	b.cur, b.used, b.curInMsg, b.open = nil, 0, false, -1
	b.fallback, b.expectItems, b.refused = false, false, nil
	err := b.fill(pc, hdrLen, walk)
	b.dropCur()
	if err != nil {
		b.msg.ReleaseBuffers()
		b.msg.Reset()
		return err
	}
	b.capped = 0
	if walk && b.lim != nil {
		b.capLimits(pc, hdrLen)
	}
	return nil
}

// capLimits lowers the transfer sizes the reply advertises to what the
// gateway can carry (ulb.CapLimits), in place. The replies that carry
// them (FSINFO, GETATTR, CREATE_SESSION) are small and land in one
// inline piece; a reply in several pieces is not looked into.
func (b *replyBuilder) capLimits(pc *pendingCall, hdrLen int) {
	if len(b.msg.Pieces) != 1 || b.msg.Pieces[0].Item || len(b.msg.Pieces[0].Data) < hdrLen {
		return
	}
	b.capped, _ = ulb.CapLimits(pc.prog, pc.vers, pc.proc, b.msg.Pieces[0].Data[hdrLen:], b.lim)
}

func (b *replyBuilder) fill(pc *pendingCall, hdrLen int, walk bool) error {
	if walk && b.walk.Reset(ulb.Reply, pc.prog, pc.vers, pc.proc) != nil {
		walk = false
	}
	// skip counts record bytes walked but not yet copied: the walk starts
	// after the RPC header, which is copied together with whatever
	// precedes the first item (or with everything, when there is none).
	skip := hdrLen
	b.expectItems = walk
	want := min(skip+ulb.FirstPeek, b.peekMax)
	for walk {
		p, err := b.rr.Peek(want)
		if err != nil && err != io.EOF {
			return err
		}
		if len(p) < skip {
			b.fallback = true // cannot happen: the header came from this window
			break
		}
		st, werr := b.walk.Next(p[skip:])
		if werr == nil && st.Kind == ulb.StepNeedMore && err == nil && len(p) < b.peekMax {
			// Look further ahead, at least doubling the window, so a
			// long result costs a few walks, not one per entry. The
			// window stays small next to a READ payload: most of the
			// payload is received straight into its buffer.
			want = min(max(skip+st.Need, 2*len(p)), b.peekMax)
			continue
		}
		if werr != nil || st.Kind == ulb.StepNeedMore {
			// Results that do not decode as the procedure's, a truncated
			// record, or a walker that needs more contiguous bytes than
			// the read-ahead holds (a huge NFSv4 result before a READ):
			// the rest goes inline and the client judges it, unless the
			// client offered a Write chunk a result there may need.
			b.fallback = true
			if b.chunkAhead(pc, b.walk.Items()) {
				b.refused = fmt.Errorf("reply xid %#x: results not walkable (%d bytes of look-ahead, error %v) and Write chunks offered", pc.xid, len(p)-skip, werr)
			}
			break
		}
		if st.Kind == ulb.StepDone {
			break
		}
		it := st.Item
		if it.Length > b.pool.MaxSize() {
			// No buffer can hold it: this and the rest travel inline
			// (an unused Write chunk is returned empty, RFC 8267 §4.3.1),
			// unless the client offered a chunk for it.
			b.fallback = true
			if b.chunkAhead(pc, it.Index) {
				b.refused = fmt.Errorf("reply xid %#x: result %d of %d bytes exceeds the largest pool buffer (%d) and a Write chunk was offered for it", pc.xid, it.Index, it.Length, b.pool.MaxSize())
			}
			break
		}
		if err := b.copyInline(skip + it.Offset); err != nil {
			return err
		}
		skip = 0
		want = min(ulb.FirstPeek, b.peekMax)
		if err := b.item(it.Length); err != nil {
			return err
		}
		if it.Pad > 0 {
			if _, err := b.rr.Discard(it.Pad); err != nil {
				return fmt.Errorf("reply xid %#x: pad after item %d: %w", pc.xid, it.Index, err)
			}
		}
	}
	b.expectItems = false
	return b.copyRest()
}

// chunkAhead reports whether the call offered a Write chunk with room
// for the reply's k-th DDP-eligible result or a later one.
func (b *replyBuilder) chunkAhead(pc *pendingCall, k int) bool {
	if pc.call == nil {
		return false
	}
	for ; k < pc.call.WriteChunks(); k++ {
		if pc.call.WriteChunkLen(k) > 0 {
			return true
		}
	}
	return false
}

// item receives an item body of n bytes into a buffer of its own.
func (b *replyBuilder) item(n int) error {
	b.open = -1
	if n == 0 {
		b.msg.Append(rdmarpc.Piece{Item: true})
		return nil
	}
	buf, err := b.get(n)
	if err != nil {
		return err
	}
	if _, err := b.rr.ReadFull(buf.Bytes); err != nil {
		buf.Release()
		return err
	}
	b.msg.Append(rdmarpc.Piece{Data: buf.Bytes, Item: true, Buf: buf})
	return nil
}

// copyInline moves the record's next n bytes into inline buffers.
func (b *replyBuilder) copyInline(n int) error {
	for n > 0 {
		if err := b.room(n); err != nil {
			return err
		}
		k := min(n, cap(b.cur.Bytes)-b.used)
		dst := b.cur.Bytes[b.used : b.used+k]
		if _, err := b.rr.ReadFull(dst); err != nil {
			return err
		}
		b.appendInline(dst)
		n -= k
	}
	return nil
}

// copyRest moves whatever is left of the record into inline buffers.
func (b *replyBuilder) copyRest() error {
	for {
		left, _ := b.rr.Remaining()
		if left == 0 {
			// Remaining counts only the current fragment: look for more.
			p, err := b.rr.Peek(1)
			if len(p) == 0 {
				if err == io.EOF {
					return nil
				}
				return err
			}
			left, _ = b.rr.Remaining()
		}
		if err := b.room(left); err != nil {
			return err
		}
		dst := b.cur.Bytes[b.used:cap(b.cur.Bytes)]
		n, err := b.rr.Read(dst)
		if n > 0 {
			b.appendInline(dst[:n])
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// appendInline adds dst, just filled at cur.Bytes[used:], to the message.
func (b *replyBuilder) appendInline(dst []byte) {
	b.used += len(dst)
	if b.open >= 0 {
		p := &b.msg.Pieces[b.open]
		p.Data = p.Data[:len(p.Data)+len(dst)]
		return
	}
	b.curInMsg = true
	b.msg.Append(rdmarpc.Piece{Data: dst[:len(dst):len(dst)], Buf: b.cur})
	b.open = len(b.msg.Pieces) - 1
	// Let the piece grow in place up to the buffer's end.
	p := &b.msg.Pieces[b.open]
	p.Data = b.cur.Bytes[b.used-len(dst) : b.used : cap(b.cur.Bytes)]
}

// room makes sure cur has free space, taking a new inline buffer sized
// for want more bytes when it is full.
func (b *replyBuilder) room(want int) error {
	if b.cur != nil && b.used < cap(b.cur.Bytes) {
		return nil
	}
	b.dropCur()
	size := want
	if b.expectItems {
		// A reply with items ahead (a READ): the inline part is small,
		// and the rest of the record is mostly item bodies.
		size = max(want, inlineFirstMax)
	} else if left, _ := b.rr.Remaining(); left > size {
		size = left
	}
	size = min(max(size, 1), b.pool.MaxSize())
	buf, err := b.get(size)
	if err != nil {
		return err
	}
	b.cur, b.used, b.curInMsg, b.open = buf, 0, false, -1
	return nil
}

// dropCur lets go of the current inline buffer; it goes back to the pool
// unless a piece of the message lies in it.
func (b *replyBuilder) dropCur() {
	if b.cur != nil && !b.curInMsg {
		b.cur.Release()
	}
	b.cur, b.used, b.curInMsg, b.open = nil, 0, false, -1
}

// inlineFirstMax is the inline buffer taken while items may follow.
const inlineFirstMax = 4096

// get takes a pool buffer, waiting while the pool or the connection's
// reply share is exhausted (the backend then waits too: TCP
// back-pressure) until the connection goes.
func (b *replyBuilder) get(n int) (*rdmarpc.Buffer, error) {
	wait := time.Millisecond
	for {
		buf, err := b.pool.GetQuota(n, b.quota)
		if err == nil {
			return buf, nil
		}
		if !errors.Is(err, rdmarpc.ErrPoolExhausted) {
			return nil, err
		}
		if b.localWait != nil && !b.localWait.Load() {
			b.localWait.Store(true)
			defer b.localWait.Store(false)
		}
		b.timer.Reset(wait)
		select {
		case <-b.timer.C:
		case <-b.done:
			if !b.timer.Stop() {
				<-b.timer.C
			}
			return nil, errConnGoing
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
