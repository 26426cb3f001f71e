package tcprpc

import "syscall"

// TryFlush is Flush without waiting: one vectored write of the queued
// records through rc, the connection's syscall.RawConn, that never waits
// for the socket to take more. It reports whether every queued byte went
// out (then the records are forgotten, as by Flush). Otherwise (the
// socket's buffer is full, the write failed, or the batch is longer
// than one writev takes: internal/sockwrite's IOVMax slices) whatever
// did not go out stays queued, a record possibly cut in the middle, and the caller must call Flush before
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
	n, _, err := rw.try.Writev(rc, rw.bufs)
	if !rw.consume(n) || err != nil {
		return false
	}
	rw.forget()
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
