package forward

import (
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// pendingCall is one client call on its way through the gateway: received
// over RDMA, sent (perhaps several times, across backend reconnects) to
// the NFS server, waiting for the reply. It is recycled through the
// session's free list, so the steady state allocates none.
type pendingCall struct {
	call             *rdmarpc.Call
	xid              uint32
	prog, vers, proc uint32
	// ddp: the reply's READ/READLINK results may be placed in chunks. Off
	// for RPCSEC_GSS integrity/privacy, whose bodies are checksummed or
	// encrypted as a whole and must stay inline.
	ddp bool
	seq uint64 // arrival order: calls are re-sent in it after a reconnect
	// breaks counts the backend connections that broke inside this call's
	// reply (backend reader): at maxReplyBreaks it is answered SYSTEM_ERR.
	breaks   uint8
	received time.Time
	sent     time.Time
	stats    *gateway.ProcCounters
	// wire is wireWriting while the backend writer is inside the writev
	// that carries the call's buffers, and wireHandedOff once the reader
	// has left the answer to it (see the ownership rule in session.go).
	wire atomic.Uint32
	// onWire is set once the writer has begun writing the call on the
	// current backend connection (after wire turns wireWriting): only
	// then may a reply be matched to it (sentCall). Cleared when the call
	// is queued again after a reconnect and when pc is recycled.
	onWire atomic.Bool
	// How the call is answered, set by the reader before it answers or
	// hands the answer to the writer (finishAnswer).
	answer     answerKind
	status     gateway.ReplyStatus // answerReply: the reply's status, for the metrics
	failReason string              // answerFail: why, for the metrics and the log
	failCause  error
	// reply is built by the backend reader and handed to call.Reply.
	reply rdmarpc.Message
	next  *pendingCall // free list
}

// pendingTable holds a session's outstanding calls by XID. The session's
// mutex guards it.
type pendingTable struct {
	byXID map[uint32]*pendingCall
	free  *pendingCall
	seq   uint64
}

func newPendingTable(capacity int) pendingTable {
	return pendingTable{byXID: make(map[uint32]*pendingCall, capacity)}
}

// get returns a cleared pendingCall from the free list.
func (t *pendingTable) get() *pendingCall {
	pc := t.free
	if pc == nil {
		return &pendingCall{}
	}
	t.free = pc.next
	pc.next = nil
	return pc
}

// put clears pc and returns it to the free list.
func (t *pendingTable) put(pc *pendingCall) {
	pc.reply.Reset()
	pc.call, pc.stats, pc.sent, pc.received = nil, nil, time.Time{}, time.Time{}
	pc.xid, pc.prog, pc.vers, pc.proc, pc.ddp, pc.seq, pc.breaks = 0, 0, 0, 0, false, 0, 0
	pc.answer, pc.status, pc.failReason, pc.failCause = answerNone, 0, "", nil
	pc.onWire.Store(false)
	pc.next = t.free
	t.free = pc
}

// add registers pc under its XID; false if a call with that XID is
// already outstanding.
func (t *pendingTable) add(pc *pendingCall) bool {
	if _, dup := t.byXID[pc.xid]; dup {
		return false
	}
	t.seq++
	pc.seq = t.seq
	t.byXID[pc.xid] = pc
	return true
}
