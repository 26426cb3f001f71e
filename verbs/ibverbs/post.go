//go:build ibverbs && cgo

package ibverbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

// Who posts a send queue's work requests to the device.
//
// On soft-RoCE (rxe) a user-space QP's requester runs inside
// ibv_post_send: segmenting, copying and the ICRC of every packet of an
// RDMA Write happen in that system call, on the caller's thread (a kernel
// QP does the same work in softirq). A 1 MiB Write costs the caller
// milliseconds under emulation, while the gateway's next work (the next
// backend reply, the next completion) waits behind it. An RDMA Read is
// as long when the peer's QP is on the same rxe device (the kernel lab):
// the request is answered in the softirq that runs as the post re-enables
// bottom halves, so the peer's responder (segmenting, ICRC) and our
// completer (ICRC check, copy into our memory) move the whole Read inside
// ibv_post_send (perf: rxe_responder and rxe_completer under
// ib_uverbs_post_send, a third of the gateway's samples in the lab's
// 1 MiB seqwrite). The engine posts the Reads of every queued call in one
// go before it polls again, and an inline post holds the send queue's
// lock, which completions and the replies' posts need. Small chains are
// no different in kind: a 4 KiB READ's reply (a Write and a Send) kept
// the gateway's backend reader inside ibv_post_send for about half a
// millisecond a reply under emulation (go tool trace of the lab's 4 KiB
// random read: 42% of the reader's time in gw_post_send, the engine 11%
// waiting for the send queue's lock), while the replies behind it waited
// in the socket: 14 ms mean from a call's write to its reply's read,
// against knfsd's 1.9 ms on the wire (tshark rpc,srt). So on rxe a chain
// that moves softPostBytes or more (its SGEs, any opcode) is handed to
// the connection's poster goroutine and PostSend returns at once: the
// caller goes on to its next reply while the poster does the protocol
// work, and the poster posts what queued meanwhile in one call (4 KiB
// random read in the lab, six alternated runs each: 467-758 IOPS, median
// 647, posted by the caller; 713-1340, median 888, by the poster). A
// smaller chain (a call, or a reply that fits one small Send) is posted
// by the caller when nothing is queued ahead of it: with every chain on
// the poster, the reverse gateway's calls (Sends of about 200 bytes)
// waited for the poster's wake-up, and its 1 MiB writes through knfsd
// fell from 34-37 to 30-35 MiB/s in three alternated pairs.
//
// Only on rxe (device caps softRoCE). Elsewhere the post is a doorbell
// (the device, or siw's kernel thread, does the work), so a hand-off
// would only add a wake-up; and siw silently drops work requests that a
// user-space QP posts after it went to the error state (its flush ran
// before they were queued), which a chain queued behind a Disconnect
// would be: the verbstest case Lifecycle/DisconnectDuringTransfer hung
// in the lab's 70-siw. rxe flushes such work requests.
//
// Ownership rules:
//   - sendQueue.mu guards the ring and the sequence numbers: tail <= sent
//     <= head. Work requests [sent, head) are filled in the C arrays (slot
//     seq % size, its SGEs at slot*maxSGE) and not yet given to the device.
//     Only PostSend writes slots, and only at head and beyond.
//   - sendQueue.postMu is held by whoever calls ibv_post_send, so the
//     device sees the work requests in sequence order: a chain posted
//     behind a queued one goes to the poster too. postMu is taken before
//     mu (PostSend only TryLocks it while holding mu).
//   - The poster posts [sent, head) without holding mu (a Write's post is
//     long, and completions take mu to free slots); the slots it reads
//     cannot change meanwhile.
//   - A post that fails on the poster cannot be reported to its caller: the
//     QP is moved to the error state (its posted work requests flush), the
//     work requests not posted complete with StatusFlushed on the send CQ,
//     and every later PostSend fails with the post's error. This is what
//     the verbs contract allows a device to do with a work request it
//     accepted (errors always complete).
//   - destroy stops the poster and waits for a post in progress (postMu)
//     before it destroys the QP.

// softPostBytes is the size from which a chain goes to the poster on rxe:
// a page, the NFS client's I/O unit.
const softPostBytes = 4 << 10

// wrsAt and scratchAt address slot s of the C arrays.
func (q *sendQueue) wrsAt(s uint64) *C.struct_gw_swr {
	return (*C.struct_gw_swr)(unsafe.Add(unsafe.Pointer(q.wrs), uintptr(s)*unsafe.Sizeof(C.struct_gw_swr{})))
}

func (q *sendQueue) scratchAt(s uint64) *C.struct_ibv_send_wr {
	return (*C.struct_ibv_send_wr)(unsafe.Add(unsafe.Pointer(q.scratch), uintptr(s)*unsafe.Sizeof(C.struct_ibv_send_wr{})))
}

// post gives work requests [first, last) to the device, in at most two
// calls (the ring wraps), and returns how many it took. postMu is held.
func (q *sendQueue) post(qp *C.struct_ibv_qp, first, last uint64) (uint64, error) {
	done := uint64(0)
	for first+done < last {
		s := (first + done) % uint64(q.size)
		n := min(last-first-done, uint64(q.size)-s)
		rc := C.gw_post_send(qp, q.scratchAt(s), q.wrsAt(s), q.sges, C.int(n), q.posted)
		done += uint64(*q.posted)
		if rc != 0 {
			return done, postErr("ibv_post_send", rc)
		}
	}
	return done, nil
}

// kickPoster wakes the connection's poster, starting it on first use
// (connections that never post softPostBytes on rxe have none). mu is held.
func (c *conn) kickPoster() {
	q := &c.sq
	if q.kick == nil {
		q.kick, q.quit = make(chan struct{}, 1), make(chan struct{})
		go c.poster(q.kick, q.quit)
	}
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// poster posts what PostSend queued, in order, until destroy stops it.
func (c *conn) poster(kick, quit chan struct{}) {
	q := &c.sq
	for {
		select {
		case <-kick:
		case <-quit:
			return
		}
		q.postMu.Lock()
		q.mu.Lock()
		for c.qp != nil && q.failed == nil && q.sent != q.head {
			qp, first, last := c.qp, q.sent, q.head
			q.mu.Unlock()
			n, err := q.post(qp, first, last)
			q.mu.Lock()
			q.sent = first + n
			if err != nil {
				c.postFailedLocked(qp, err)
			}
		}
		q.mu.Unlock()
		q.postMu.Unlock()
	}
}

// postFailedLocked handles a failed post on the poster (see the rules at
// the top): mu and postMu are held.
func (c *conn) postFailedLocked(qp *C.struct_ibv_qp, err error) {
	q := &c.sq
	q.failed = fmt.Errorf("ibverbs: a queued send work request could not be posted: %w", err)
	C.gw_qp_error(qp)
	wcs := make([]verbs.WC, 0, q.head-q.sent)
	for seq := q.sent; seq < q.head; seq++ {
		s := q.ring[seq%uint64(q.size)]
		wcs = append(wcs, verbs.WC{ID: s.id, Op: s.op, Status: verbs.StatusFlushed, Conn: c})
	}
	q.tail, q.sent = q.head, q.head
	// The CQ's lock is taken before a send queue's when it polls, so the
	// completions are added without mu.
	q.mu.Unlock()
	c.scq.inject(wcs)
	q.mu.Lock()
}

// stopPoster ends the poster and waits for a post in progress; the caller
// then destroys the QP.
func (c *conn) stopPoster() {
	q := &c.sq
	q.mu.Lock()
	if q.quit != nil {
		close(q.quit)
		q.quit = nil
	}
	q.mu.Unlock()
	q.postMu.Lock()
	q.postMu.Unlock()
}
