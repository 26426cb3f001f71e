// Package sockread reads a TCP socket without the read(2) that only says
// "nothing more yet".
//
// A Go read loop over a net.Conn pays two read system calls per message
// when the peer sends one message and waits for the answer: one that
// returns the message, and one that returns EAGAIN before the goroutine
// parks in the netpoller. The second cannot be skipped across
// net.Conn.Read (or RawConn.Read) calls: each call first resets the
// poller's readiness for the descriptor (internal/poll prepareRead:
// runtime_pollReset stores pdNil), so a notification for data that came
// between two calls is forgotten, and only a read can tell.
//
// Reader.Run makes one RawConn.Read call for as long as its Consumer has
// work, and each read into a buffer of up to internal/nbcall's RawMax is
// a raw system call, which keeps the goroutine's P. Inside the call the
// readiness is reset once; each read is a recvmsg with TCP_INQ (Linux
// 4.18), whose answer says how many bytes the socket still holds after
// it, or 1 once the peer's FIN is in: after a read that left 0 the next
// wait goes straight to the poller. Nothing is lost: the
// descriptor is registered edge-triggered, every segment queued after
// that read raises an edge, and the runtime keeps an edge that comes
// while the goroutine is busy (pdReady) until the wait consumes it, so
// the wait then returns at once and the read that follows finds the data.
// One thing no answer tells: a reset (RST) that came right behind data,
// before the read that took the data, raises no further edge; the reset
// is then seen when a write fails (the usual case: the data was a call,
// and its answer is written), at a deadline, or on Close. Where TCP_INQ
// cannot be set (not TCP, an older kernel) every wait is preceded by the
// read that returns EAGAIN, as with net.Conn.
//
// A Consumer that is a Scatterer has a read fill up to MaxPieces places
// in stream order (verbs/iwarp lays out the next segments of an RDMA
// Read Response behind the current one, each payload in its place).
//
// The Consumer's work runs inside the RawConn.Read callback, holding the
// descriptor's read lock: it must not read the same connection by any
// other means, and a Close of the connection waits for Run to return
// (Next returning nil, or the wait failing with the close). A read
// deadline ends Run only while it waits, as it ends a net.Conn.Read only
// when that would block, except that a deadline already past when Run
// starts ends it at once.
package sockread

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmagw/rdmagw/internal/nbcall"
)

// Consumer is the work a Reader runs between reads.
type Consumer interface {
	// Next consumes what the reads so far brought and returns where
	// the next read goes: p (non-empty), and tail, where what the
	// socket holds beyond p lands in the same system call (a readv;
	// may be empty), so that a payload read straight into its
	// destination brings the bytes behind it into a buffer at no extra
	// call. p == nil ends Run. Next is called before every read and
	// before every wait for the socket.
	Next() (p, tail []byte)
	// Got reports a read into the slices Next returned: n > 0 bytes
	// (p filled first, then tail), or n == 0 with io.EOF (the peer
	// closed its side) or the read's error. Run ends after an error or
	// when Got returns false.
	Got(n int, err error) bool
}

// Scatterer is a Consumer whose reads may go to more than two places (a
// readv of up to MaxPieces): Reader calls NextScatter instead of Next,
// which appends where the next read goes, in stream order, to dst; none
// (or a first piece that is empty) ends Run. Got reports the bytes
// filled in that order.
type Scatterer interface {
	NextScatter(dst [][]byte) [][]byte
}

// MaxPieces is the most places one read fills (Scatterer).
const MaxPieces = 32

// Reader runs a Consumer on a socket. The zero value is not usable: call
// Init. A Reader is used by one goroutine at a time.
type Reader struct {
	rc      syscall.RawConn
	c       Consumer
	sc      Scatterer             // c, when it is one
	fn      func(fd uintptr) bool // step, bound once
	inq     bool                  // TCP_INQ is on: reads say what is left
	drained bool                  // the last read left the socket empty: wait first
	queued  bool                  // the last read left data in the socket (Queued)
	// recvmsg's and readv's arguments, kept here so that a read
	// allocates nothing.
	msg    unix.Msghdr
	iov    [MaxPieces]unix.Iovec
	pieces [MaxPieces][]byte
	oob    [unix.SizeofCmsghdr + 8]byte
	reads  atomic.Uint64
	waits  atomic.Uint64
}

// Init binds r to the socket rc and the consumer c. With skipEmpty it
// asks the kernel for TCP_INQ and waits without a read after one that
// left the socket empty; without it every wait is preceded by the read
// that returns EAGAIN (as with net.Conn), for a user that cannot bound
// the reset case (see the package doc). The users that skip bound it
// themselves: gateway/forward's backend reader by its next write or
// ping; the ones whose connections may write nothing after the peer's
// last bytes (verbs/iwarp, gateway/reverse's client reader) with
// RunChecked.
func (r *Reader) Init(rc syscall.RawConn, c Consumer, skipEmpty bool) {
	r.rc, r.c = rc, c
	r.sc, _ = c.(Scatterer)
	r.fn = r.step
	r.msg.Iov = &r.iov[0]
	r.inq = false
	if skipEmpty {
		rc.Control(func(fd uintptr) {
			r.inq = unix.SetsockoptInt(int(fd), unix.SOL_TCP, unix.TCP_INQ, 1) == nil
		})
	}
}

// RunChecked is Run for a user whose connection may have nothing to
// write that would fail on a reset right behind the peer's last data
// (the package doc): while r skips the EAGAIN read, every Run is given a
// read deadline every from now through deadline, and a Run that deadline
// ended is started again while live reports true (a Run reads first,
// and that read sees the reset). deadline reports false when the user's
// own deadline, set to stop the reader, must stay: RunChecked then
// returns nil without a Run. Without the skip (no TCP_INQ) the EAGAIN
// read sees the reset, and RunChecked is Run.
func (r *Reader) RunChecked(every time.Duration, deadline func(time.Time) bool, live func() bool) error {
	for {
		if r.inq && !deadline(time.Now().Add(every)) {
			return nil
		}
		err := r.Run()
		if r.inq && errors.Is(err, os.ErrDeadlineExceeded) && live() {
			continue
		}
		return err
	}
}

// Run reads and consumes until Next returns nil, Got returns false or
// reports an error (nil is returned then), or a wait for the socket fails
// (the RawConn's error: the read deadline passed, the connection was
// closed).
func (r *Reader) Run() error {
	// RawConn.Read starts by forgetting the socket's readiness: the
	// first read of the call must look.
	r.drained, r.queued = false, false
	return r.rc.Read(r.fn)
}

// SkipsEmpty reports whether waits go without the EAGAIN read: Init was
// asked to and the kernel took TCP_INQ.
func (r *Reader) SkipsEmpty() bool { return r.inq }

// Queued reports, inside the Consumer's Next, whether the read that
// follows finds data: the last read of this Run said (TCP_INQ) that the
// socket held more. False without TCP_INQ, and before a Run's first read.
func (r *Reader) Queued() bool { return r.queued }

// Reads is the number of read system calls made so far, Waits the number
// of times Run waited for the socket (safe to call from any goroutine).
func (r *Reader) Reads() uint64 { return r.reads.Load() }

// Waits: see Reads.
func (r *Reader) Waits() uint64 { return r.waits.Load() }

// step is the RawConn.Read callback: true ends the call, false waits for
// the socket to become readable and calls it again.
func (r *Reader) step(fd uintptr) bool {
	for {
		pieces := r.next()
		if len(pieces) == 0 || len(pieces[0]) == 0 {
			return true
		}
		if r.drained {
			r.drained = false
			r.waits.Add(1)
			return false
		}
		n, left, err := r.read(fd, pieces)
		r.reads.Add(1)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			r.waits.Add(1)
			return false
		case err != nil:
			r.c.Got(0, os.NewSyscallError("recvmsg", err))
			return true
		case n == 0:
			r.c.Got(0, io.EOF)
			return true
		}
		r.drained, r.queued = left == 0, left > 0
		if !r.c.Got(n, nil) {
			return true
		}
	}
}

// next asks the consumer where the next read goes: p and tail (Next),
// or the Scatterer's pieces.
func (r *Reader) next() [][]byte {
	if r.sc != nil {
		return r.sc.NextScatter(r.pieces[:0])
	}
	p, tail := r.c.Next()
	if p == nil {
		return nil
	}
	r.pieces[0], r.pieces[1] = p, tail
	return r.pieces[:2]
}

// read reads into the pieces in order (the empty ones skipped); left is
// what the socket holds after it (TCP_INQ; 1 once the FIN is in), or -1
// when unknown.
func (r *Reader) read(fd uintptr, pieces [][]byte) (n, left int, err error) {
	iovs, size := 0, 0
	for _, b := range pieces[:min(len(pieces), len(r.iov))] {
		if len(b) == 0 {
			continue
		}
		r.iov[iovs].Base = unsafe.SliceData(b)
		r.iov[iovs].SetLen(len(b))
		iovs++
		size += len(b)
	}
	clear(pieces) // keep no reference to the consumer's buffers
	var m uintptr
	var e syscall.Errno
	switch {
	case r.inq:
		r.msg.SetIovlen(iovs)
		r.msg.Control = &r.oob[0]
		r.msg.SetControllen(len(r.oob))
		m, e = nbcall.Call(size, unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&r.msg)), 0)
	case iovs == 1:
		m, e = nbcall.Call(size, unix.SYS_READ, fd, uintptr(unsafe.Pointer(r.iov[0].Base)), uintptr(r.iov[0].Len))
	default:
		m, e = nbcall.Call(size, unix.SYS_READV, fd, uintptr(unsafe.Pointer(&r.iov[0])), uintptr(iovs))
	}
	clear(r.iov[:iovs]) // keep no reference to the consumer's buffers
	if e != 0 {
		return 0, -1, e
	}
	left = -1
	if r.inq {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&r.oob[0]))
		if r.msg.Controllen >= unix.SizeofCmsghdr+4 && h.Level == unix.SOL_TCP && h.Type == unix.TCP_CM_INQ {
			left = int(*(*int32)(unsafe.Pointer(&r.oob[unix.SizeofCmsghdr])))
		}
	}
	return int(m), left, nil
}

// Ready reports whether Init was called.
func (r *Reader) Ready() bool { return r.rc != nil }
