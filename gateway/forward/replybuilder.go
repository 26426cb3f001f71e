package forward

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/gateway/internal/splitter"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// replyBuilder turns one backend reply record into an rdmarpc.Message
// without gathering it: the record is streamed by a splitter.Splitter
// (Inline = Registered) into registered pool buffers straight from the
// socket, each DDP-eligible result body (READ data, READLINK path) in a
// buffer of its own as an Item piece, everything else in inline buffers
// around them:
//
//	[ inline: RPC reply header, READ3resok up to the data length ]
//	[ item: the READ data, in a pool buffer, the engine RDMA-writes it ]
//	[ inline: whatever follows the data's XDR pad ]
//
// The inline bytes are copied once (from the read-ahead buffer or the
// socket into registered memory, where the engine can Send or RDMA-Write
// them); item bodies are received from the socket into their buffer.
// What is forward mode's own is what a walk that stopped early means
// (fallback, refused) and the transfer sizes lowered (capLimits).
// A replyBuilder is owned by one backend reader goroutine.
type replyBuilder struct {
	rr   *tcprpc.RecordReader
	pool *rdmarpc.Pool
	sp   *splitter.Splitter
	ctx  context.Context // ends when the backend connection is going away

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

	// pc is the call whose reply is being built, for ahead; noAhead is
	// set once a Write ahead failed in this reply.
	pc      *pendingCall
	noAhead bool
}

// newReplyBuilder returns the builder of a backend reader: buffers are
// charged to quota (the connection's connections.max_reply_memory), and
// localWait is set while it waits for them (the reader is held up on our
// side, not by the server: the backend watchdog skips it).
// cutThrough is rdma.cut_through: item bodies are written ahead of the
// reply in parts of at least that many bytes (0: not at all).
func newReplyBuilder(ctx context.Context, rr *tcprpc.RecordReader, pool *rdmarpc.Pool, quota *rdmarpc.Quota, localWait *atomic.Bool, peekMax int, lim *ulb.IOLimits, cutThrough int) *replyBuilder {
	b := &replyBuilder{rr: rr, pool: pool, ctx: ctx, lim: lim}
	cfg := splitter.Config{Pool: pool, Quota: quota, Window: peekMax, Inline: splitter.Registered, LocalWait: localWait}
	if cutThrough > 0 {
		cfg.Ahead, cfg.AheadMin = b.ahead, cutThrough
	}
	b.sp = splitter.New(cfg)
	return b
}

// ahead is the splitter's Config.Ahead (cut-through): the part of a
// reply item received so far goes into the client's Write chunk now
// (rdmarpc.Call.WriteAhead), and the reply later writes the rest. An
// item the call has no room for, or a call answered otherwise, is left
// to the reply (ErrNotAhead); after any refusal the rest of this reply
// is too, so a connection that has ended costs one attempt.
func (b *replyBuilder) ahead(item, done, got int, buf *rdmarpc.Buffer) int {
	pc := b.pc
	if b.noAhead || pc == nil || pc.call == nil {
		return done
	}
	if err := pc.call.WriteAhead(item, len(buf.Bytes), done, buf.Bytes[done:got], buf); err != nil {
		b.noAhead = true
		return done
	}
	return got
}

// errConnGoing: the backend connection ended while waiting for buffers.
var errConnGoing = errors.New("forward: backend connection closing")

// build reads the current record, whose first hdrLen bytes are the RPC
// reply header just decoded from a Peek, into pc.reply. walk says whether
// to look for DDP-eligible results. On error the message's buffers have
// been released and the message is empty.
func (b *replyBuilder) build(pc *pendingCall, hdrLen int, walk bool) error {
	b.fallback, b.refused, b.capped = false, nil, 0
	b.pc, b.noAhead = pc, false
	out, err := b.sp.Split(b.ctx, b.rr, &pc.reply, splitter.Record{XID: pc.xid, Dir: ulb.Reply,
		Prog: pc.prog, Vers: pc.vers, Proc: pc.proc, HdrLen: hdrLen, Walk: walk})
	b.pc = nil
	if err != nil {
		if b.ctx.Err() != nil {
			return errConnGoing
		}
		return err
	}
	switch out.Stop {
	case splitter.Unwalkable:
		// Results that do not decode as the procedure's, a truncated
		// record, or a walker that needs more contiguous bytes than the
		// read-ahead holds (a huge NFSv4 result before a READ): the rest
		// went inline and the client judges it, unless the client
		// offered a Write chunk a result there may need.
		b.fallback = true
		if b.chunkAhead(pc, out.Item) {
			b.refused = fmt.Errorf("reply xid %#x: results not walkable (%d bytes of look-ahead, error %v) and Write chunks offered", pc.xid, out.Lookahead, out.Err)
		}
	case splitter.TooLarge:
		// No buffer can hold it: this and the rest travel inline (an
		// unused Write chunk is returned empty, RFC 8267 §4.3.1), unless
		// the client offered a chunk for it.
		b.fallback = true
		if b.chunkAhead(pc, out.Item) {
			b.refused = fmt.Errorf("reply xid %#x: result %d of %d bytes exceeds the largest pool buffer (%d) and a Write chunk was offered for it", pc.xid, out.Item, out.Length, b.pool.MaxSize())
		}
	}
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
	m := &pc.reply
	if len(m.Pieces) != 1 || m.Pieces[0].Item || len(m.Pieces[0].Data) < hdrLen {
		return
	}
	b.capped, _ = ulb.CapLimits(pc.prog, pc.vers, pc.proc, m.Pieces[0].Data[hdrLen:], b.lim)
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
