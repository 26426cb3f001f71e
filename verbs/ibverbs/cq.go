//go:build ibverbs && cgo

package ibverbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

const pollBatch = 32

// cq is a completion queue with its own completion channel. The channel's
// fd is non-blocking and registered with the Go runtime poller, so Wait
// parks its goroutine and no thread spins or sleeps in ibv_get_cq_event.
type cq struct {
	dev  *device
	cq   *C.struct_ibv_cq
	ch   *C.struct_ibv_comp_channel
	file *os.File
	raw  syscall.RawConn
	// drain is the netpoller callback of Wait, made once so a Wait does
	// not allocate it: it takes every notification off the channel and
	// reports whether there was one.
	drain func(uintptr) bool

	mu      sync.Mutex // serialises the C calls on cq, and closed
	closed  bool
	scratch *C.struct_ibv_wc
	out     *C.struct_gw_wc
	// ahead holds completions Wait polled to close the race between
	// arming the channel and a completion arriving; Poll returns them
	// first.
	ahead    []verbs.WC
	aheadBuf [pollBatch]verbs.WC
	// injected holds completions the provider made itself (work requests
	// a connection's poster could not post, post.go); Poll returns them
	// after the device's.
	injected []verbs.WC

	connsMu sync.RWMutex
	conns   map[uint32]*conn // by QP number, for WC.Conn

	hook waitHook // Wait's watch on its context
}

// waitHook is Wait's watch on its context: when the context ends, the hook
// sets the channel's read deadline in the past, which wakes a parked Wait
// (and makes the next one look at the context). It is registered once per
// context (context.AfterFunc allocates) and kept across Waits: the
// consumer waits with the same context for the life of its connection
// (rdmarpc's endpoint), so a Wait allocates nothing. A Wait with another
// context (another Done channel) first takes the hook off the old one.
type waitHook struct {
	mu    sync.Mutex
	done  <-chan struct{} // the watched context's Done (nil: none watched)
	stop  func() bool
	fired chan struct{} // closed once the hook has run
}

func newCQ(d *device, depth int) (*cq, error) {
	if depth <= 0 {
		return nil, fmt.Errorf("ibverbs: CreateCQ(%d)", depth)
	}
	depth = min(depth, d.caps.maxCQE)
	ch, err := C.ibv_create_comp_channel(d.ctx)
	if ch == nil {
		return nil, wrap("ibv_create_comp_channel", err)
	}
	c, err := C.ibv_create_cq(d.ctx, C.int(depth), nil, ch, 0)
	if c == nil {
		C.ibv_destroy_comp_channel(ch)
		return nil, wrap(fmt.Sprintf("ibv_create_cq(%d)", depth), err)
	}
	q := &cq{dev: d, cq: c, ch: ch, conns: map[uint32]*conn{}}
	q.drain = func(uintptr) bool { return C.gw_drain_cq_events(q.ch) > 0 }
	if q.file, err = pollable(int(ch.fd), "ibv_comp_channel"); err == nil {
		q.raw, err = q.file.SyscallConn()
	}
	if err != nil {
		q.destroy()
		return nil, err
	}
	q.scratch = (*C.struct_ibv_wc)(C.calloc(pollBatch, C.size_t(unsafe.Sizeof(C.struct_ibv_wc{}))))
	q.out = (*C.struct_gw_wc)(C.calloc(pollBatch, C.size_t(unsafe.Sizeof(C.struct_gw_wc{}))))
	return q, nil
}

func (q *cq) addConn(c *conn) {
	q.connsMu.Lock()
	q.conns[c.qpNum] = c
	q.connsMu.Unlock()
}

func (q *cq) delConn(c *conn) {
	q.connsMu.Lock()
	if q.conns[c.qpNum] == c {
		delete(q.conns, c.qpNum)
	}
	q.connsMu.Unlock()
}

func (q *cq) Poll(wcs []verbs.WC) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0
	}
	n := copy(wcs, q.ahead)
	q.ahead = q.ahead[n:]
	for n < len(wcs) {
		want := min(len(wcs)-n, pollBatch)
		got := q.pollLocked(wcs[n : n+want])
		n += got
		if got < want {
			break
		}
	}
	if len(q.injected) > 0 {
		k := copy(wcs[n:], q.injected)
		q.injected = q.injected[k:]
		n += k
	}
	return n
}

// inject adds completions the provider made itself and wakes a parked
// Wait.
func (q *cq) inject(wcs []verbs.WC) {
	q.mu.Lock()
	q.injected = append(q.injected, wcs...)
	closed := q.closed
	q.mu.Unlock()
	if !closed {
		_ = q.file.SetReadDeadline(longAgo)
	}
}

// pollLocked polls up to len(dst) (≤ pollBatch) completions into dst.
func (q *cq) pollLocked(dst []verbs.WC) int {
	got := int(C.gw_poll(q.cq, q.scratch, q.out, C.int(len(dst))))
	if got <= 0 {
		return 0
	}
	raw := unsafe.Slice(q.out, got)
	q.connsMu.RLock()
	for i := range raw {
		dst[i] = q.convert(&raw[i])
	}
	q.connsMu.RUnlock()
	return got
}

// Work request id layout: the top two bits say which queue the request was
// posted to (error completions carry no reliable opcode), the rest is a
// per-queue sequence number or SRQ slot that indexes the caller's id.
const (
	tagShift = 62
	tagSend  = 1
	tagRecv  = 2
	tagSRQ   = 3
	seqMask  = 1<<tagShift - 1
)

// convert turns a raw completion into a verbs.WC; connsMu is read-locked.
func (q *cq) convert(w *C.struct_gw_wc) verbs.WC {
	wc := verbs.WC{Status: status(w.status), ByteLen: int(w.byte_len)}
	c := q.conns[uint32(w.qp_num)]
	if c != nil {
		wc.Conn = c
	}
	id := uint64(w.wr_id)
	seq := id & seqMask
	switch id >> tagShift {
	case tagSend:
		wc.ID, wc.Op = seq, verbs.OpSend
		if c != nil {
			wc.ID, wc.Op = c.sq.completed(seq)
		}
	case tagRecv:
		wc.ID, wc.Op = seq, verbs.OpRecv
		if c != nil {
			wc.ID = c.rq.completed(seq)
		}
	case tagSRQ:
		wc.ID, wc.Op = seq, verbs.OpRecv
		if s := lookupSRQ(uint32(seq >> 32)); s != nil {
			wc.ID = s.completed(uint32(seq))
		}
	}
	if wc.Op == verbs.OpRecv && w.status == C.IBV_WC_LOC_QP_OP_ERR && q.dev.caps.softRoCE {
		// rxe fails a receive whose buffer is too small for the message
		// as a malformed WQE; the SGEs were checked at post time, so the
		// length is what failed (an InfiniBand HCA says LOC_LEN_ERR).
		wc.Status = verbs.StatusLocalLength
	}
	if wc.Op == verbs.OpRecv && w.wc_flags&C.IBV_WC_WITH_INV != 0 {
		wc.Invalidated, wc.InvalidatedRKey = true, uint32(w.inv_rkey)
		if c != nil && wc.Status == verbs.StatusSuccess {
			c.pd.remoteInvalidated(wc.InvalidatedRKey)
		}
	}
	return wc
}

// ready reports whether a completion is waiting; when none is, it leaves
// the CQ armed so the next completion signals the channel.
func (q *cq) ready() (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false, verbs.ErrClosed
	}
	if len(q.ahead) > 0 || len(q.injected) > 0 {
		return true, nil
	}
	if n := q.pollLocked(q.aheadBuf[:]); n > 0 {
		q.ahead = q.aheadBuf[:n]
		return true, nil
	}
	if rc := C.gw_req_notify(q.cq); rc != 0 {
		return false, fmt.Errorf("ibverbs: ibv_req_notify_cq: %w", errno(rc))
	}
	// A completion that arrived before the arm raised no event: look again.
	if n := q.pollLocked(q.aheadBuf[:]); n > 0 {
		q.ahead = q.aheadBuf[:n]
		return true, nil
	}
	return false, nil
}

var longAgo = time.Unix(1, 0)

// watch makes sure the hook watches ctx (see waitHook).
func (q *cq) watch(ctx context.Context) {
	h := &q.hook
	h.mu.Lock()
	defer h.mu.Unlock()
	done := ctx.Done()
	if done == h.done {
		return
	}
	q.unwatchLocked()
	if done == nil {
		return // a context that never ends: nothing to watch
	}
	fired := make(chan struct{})
	h.done, h.fired = done, fired
	h.stop = context.AfterFunc(ctx, func() {
		_ = q.file.SetReadDeadline(longAgo)
		close(fired)
	})
}

// unwatchLocked takes the hook off its context; if it already ran, it
// waits for it to finish and clears the deadline it set. Caller holds
// q.hook.mu.
func (q *cq) unwatchLocked() {
	h := &q.hook
	if h.done == nil {
		return
	}
	if !h.stop() {
		<-h.fired
		_ = q.file.SetReadDeadline(time.Time{})
	}
	h.done, h.stop, h.fired = nil, nil, nil
}

func (q *cq) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.watch(ctx)
	for {
		ok, err := q.ready()
		if ok || err != nil {
			return err
		}
		err = q.raw.Read(q.drain)
		switch {
		case err == nil:
			// Notified; the loop polls (an event may be stale).
		case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, os.ErrDeadlineExceeded):
			// inject's wake-up: clear it, then look again (a context
			// that ended meanwhile set the deadline after ctx.Err
			// turned non-nil, so checking it after the reset is enough).
			_ = q.file.SetReadDeadline(time.Time{})
			if err := ctx.Err(); err != nil {
				return err
			}
		case errors.Is(err, os.ErrClosed):
			return verbs.ErrClosed
		default:
			q.mu.Lock()
			closed := q.closed
			q.mu.Unlock()
			if closed {
				return verbs.ErrClosed
			}
			return wrap("waiting on the completion channel", err)
		}
	}
}

// Close destroys the CQ; a Wait blocked on it returns ErrClosed. Every
// connection using it must be closed first.
func (q *cq) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.mu.Unlock()
	q.hook.mu.Lock()
	q.unwatchLocked() // before the file closes: the hook may be setting its deadline
	q.hook.mu.Unlock()
	return q.destroy()
}

func (q *cq) destroy() error {
	if q.file != nil {
		q.file.Close() // wakes a parked Wait and waits for its callback
	}
	var err error
	if rc := C.ibv_destroy_cq(q.cq); rc != 0 {
		err = fmt.Errorf("ibverbs: ibv_destroy_cq: %w", errno(rc))
	}
	if rc := C.ibv_destroy_comp_channel(q.ch); rc != 0 && err == nil {
		err = fmt.Errorf("ibverbs: ibv_destroy_comp_channel: %w", errno(rc))
	}
	C.free(unsafe.Pointer(q.scratch))
	C.free(unsafe.Pointer(q.out))
	return err
}
