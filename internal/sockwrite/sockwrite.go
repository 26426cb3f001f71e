// Package sockwrite writes a gather list to a socket through its
// syscall.RawConn. Writev makes one writev that never waits: for a
// sender that hands what the socket does not take at once to a goroutine
// of its own rather than park (verbs/iwarp's idle inline transmit,
// tcprpc.RecordWriter.TryFlush); its callback reports done at once, so
// the runtime never waits on the poller for it. It is the write side of
// internal/sockread. WriteAll writes all of it, waiting on the poller
// while the socket is full, as net.Buffers.WriteTo does (the iwarp
// transmit goroutine, tcprpc.RecordWriter.Flush). Either way a small
// writev is a raw system call, which keeps the goroutine's P
// (internal/nbcall).
package sockwrite

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmagw/rdmagw/internal/nbcall"
)

// IOVMax is Linux's IOV_MAX: the most iovecs one writev takes.
const IOVMax = 1024

// Writer makes the writes. The zero value is usable; a Writer is used by
// one goroutine at a time and keeps its iovecs between writes, so the
// steady state allocates nothing.
type Writer struct {
	iov []unix.Iovec
	fn  func(fd uintptr) bool // writev, bound once
	n   int                   // what the last writev wrote
	err error
	try int                   // what the writev tries to write (nbcall: raw if small)
	all func(fd uintptr) bool // writeAll, bound once
	at  int                   // WriteAll: iov[at:] is left to write
}

// Writev makes one writev through rc of the non-empty slices of bufs,
// the first IOVMax of them. It returns the bytes written and the bytes
// it tried to write. A socket with no room (EAGAIN) is n 0 and err nil;
// EINTR is retried; another failure is err (an *os.SyscallError, or
// rc's error when the connection is closed).
func (w *Writer) Writev(rc syscall.RawConn, bufs [][]byte) (n, tried int, err error) {
	tried = w.load(bufs, IOVMax)
	if tried == 0 {
		return 0, 0, nil
	}
	if w.fn == nil {
		w.fn = w.writev
	}
	w.n, w.err, w.try = 0, nil, tried
	err = rc.Write(w.fn)
	clear(w.iov) // keep no reference to the caller's buffers
	if err != nil {
		return 0, tried, err
	}
	return w.n, tried, w.err
}

// load makes w.iov the iovecs of the non-empty slices of bufs, at most
// limit of them, and returns their length in bytes.
func (w *Writer) load(bufs [][]byte, limit int) int {
	w.iov = w.iov[:0]
	n := 0
	for _, b := range bufs {
		if len(w.iov) == limit {
			break
		}
		if len(b) > 0 {
			v := unix.Iovec{Base: unsafe.SliceData(b)}
			v.SetLen(len(b))
			w.iov = append(w.iov, v)
			n += len(b)
		}
	}
	return n
}

// writev is the RawConn.Write callback: one writev, never waiting.
func (w *Writer) writev(fd uintptr) bool {
	for {
		n, e := nbcall.Call(w.try, unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(w.iov))), uintptr(len(w.iov)))
		switch e {
		case 0:
			w.n = int(n)
		case unix.EINTR:
			continue
		case unix.EAGAIN:
		default:
			w.err = os.NewSyscallError("writev", e)
		}
		return true
	}
}

// WriteAll writes all of bufs through rc, as net.Buffers.WriteTo does on
// a *net.TCPConn: writev calls of up to IOVMax slices, waiting on the
// poller while the socket is full (and failing at the connection's write
// deadline), each small one a raw system call (internal/nbcall). It
// returns the bytes written and the first failure (an
// *os.SyscallError, or rc's: the connection closed, the deadline
// passed). bufs is not modified.
func (w *Writer) WriteAll(rc syscall.RawConn, bufs [][]byte) (int64, error) {
	w.try = w.load(bufs, len(bufs))
	if w.try == 0 {
		return 0, nil
	}
	if w.all == nil {
		w.all = w.writeAll
	}
	w.n, w.err, w.at = 0, nil, 0
	err := rc.Write(w.all)
	clear(w.iov)
	if err == nil {
		err = w.err
	}
	return int64(w.n), err
}

// writeAll is WriteAll's RawConn.Write callback: writev until all is
// written (true), a failure (true, w.err), or the socket is full (false:
// the runtime waits for it to drain and calls again).
func (w *Writer) writeAll(fd uintptr) bool {
	for w.at < len(w.iov) {
		iov := w.iov[w.at:min(len(w.iov), w.at+IOVMax)]
		n, e := nbcall.Call(w.try-w.n, unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			w.err = os.NewSyscallError("writev", e)
			return true
		}
		w.n += int(n)
		for left := int(n); left > 0; {
			v := &w.iov[w.at]
			if uint64(left) < v.Len {
				v.Base = (*byte)(unsafe.Add(unsafe.Pointer(v.Base), left))
				v.Len -= uint64(left)
				break
			}
			left -= int(v.Len)
			w.at++
		}
	}
	return true
}
