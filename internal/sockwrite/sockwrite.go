// Package sockwrite writes a gather list to a socket with one writev
// that never waits: for a sender that hands what the socket does not take
// at once to a goroutine of its own rather than park (verbs/iwarp's idle
// inline transmit, tcprpc.RecordWriter.TryFlush). It is the write side
// of internal/sockread: the system call runs inside
// syscall.RawConn.Write, whose callback reports done at once, so the
// runtime never waits on the poller for it.
package sockwrite

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
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
}

// Writev makes one writev through rc of the non-empty slices of bufs,
// the first IOVMax of them. It returns the bytes written and the bytes
// it tried to write. A socket with no room (EAGAIN) is n 0 and err nil;
// EINTR is retried; another failure is err (an *os.SyscallError, or
// rc's error when the connection is closed).
func (w *Writer) Writev(rc syscall.RawConn, bufs [][]byte) (n, tried int, err error) {
	w.iov = w.iov[:0]
	for _, b := range bufs {
		if len(w.iov) == IOVMax {
			break
		}
		if len(b) > 0 {
			v := unix.Iovec{Base: unsafe.SliceData(b)}
			v.SetLen(len(b))
			w.iov = append(w.iov, v)
			tried += len(b)
		}
	}
	if len(w.iov) == 0 {
		return 0, 0, nil
	}
	if w.fn == nil {
		w.fn = w.writev
	}
	w.n, w.err = 0, nil
	err = rc.Write(w.fn)
	clear(w.iov) // keep no reference to the caller's buffers
	if err != nil {
		return 0, tried, err
	}
	return w.n, tried, w.err
}

// writev is the RawConn.Write callback: one writev, never waiting.
func (w *Writer) writev(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(w.iov))), uintptr(len(w.iov)))
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
