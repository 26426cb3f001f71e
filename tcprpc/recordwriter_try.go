package tcprpc

import (
	"syscall"
	"unsafe"
)

// maxTryIovecs bounds the iovecs of one TryFlush attempt (Linux's
// IOV_MAX); a longer batch is left, in part, to Flush.
const maxTryIovecs = 1024

// TryFlush is Flush without waiting: one vectored write of the queued
// records through rc, the connection's syscall.RawConn, that never waits
// for the socket to take more. It reports whether every queued byte went
// out (then the records are forgotten, as by Flush). Otherwise (the
// socket's buffer is full, the write failed, or the batch is longer
// than one attempt takes) whatever did not go out stays queued, a record
// possibly cut in the middle, and the caller must call Flush before
// anything else is queued: Flush writes the rest, waiting as usual, and
// reports the error, if any. The storage is reused, so the steady state
// allocates nothing.
func (rw *RecordWriter) TryFlush(rc syscall.RawConn) bool {
	if rw.queued == 0 {
		return rw.err == nil
	}
	if rw.err != nil {
		return false
	}
	if rw.bufs == nil {
		rw.bufs = rw.iov
	}
	if rw.tryFn == nil {
		rw.tryFn = rw.writevOnce // bound once: no allocation per call
	}
	rw.tryN, rw.tryErr = 0, 0
	if rc.Write(rw.tryFn) != nil || rw.tryErr != 0 {
		rw.consume(max(rw.tryN, 0))
		return false
	}
	if !rw.consume(rw.tryN) {
		return false
	}
	rw.forget()
	return true
}

// writevOnce makes one writev of the unwritten part of the queued
// records, at most maxTryIovecs slices, and never asks to wait.
func (rw *RecordWriter) writevOnce(fd uintptr) bool {
	iov := rw.sysIov[:0]
	for _, b := range rw.bufs {
		if len(b) == 0 {
			continue
		}
		if len(iov) == maxTryIovecs {
			break
		}
		v := syscall.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		iov = append(iov, v)
	}
	rw.sysIov = iov
	if len(iov) == 0 {
		return true
	}
	n, _, e := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	clear(iov) // keep no reference to the caller's buffers
	rw.tryN, rw.tryErr = int(n), e
	if e != 0 {
		rw.tryN = 0
	}
	return true
}

// consume drops the first n written bytes from rw.bufs and reports
// whether nothing is left.
func (rw *RecordWriter) consume(n int) bool {
	b := rw.bufs
	for len(b) > 0 && n >= len(b[0]) {
		n -= len(b[0])
		b = b[1:]
	}
	if len(b) > 0 && n > 0 {
		b[0] = b[0][n:]
	}
	rw.bufs = b
	return len(b) == 0
}
