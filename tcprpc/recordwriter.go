package tcprpc

import (
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/rdmagw/rdmagw/internal/sockwrite"
)

// errRecordOverflow: WriteRecord was given more bytes than an int counts.
var errRecordOverflow = errors.New("tcprpc: record length overflows int")

// WriterConfig tunes a RecordWriter. Zero fields take the defaults.
type WriterConfig struct {
	// MaxFragment is the most data bytes per fragment. Records longer
	// than that are split. The default, MaxFragmentLen, sends every
	// record of up to 2 GiB as one fragment, as the Linux client and
	// server do.
	MaxFragment int
}

// RecordWriter frames records onto a stream.
//
// WriteRecord hands the fragment header(s), head, payload and tail to the
// underlying writer as one net.Buffers: on a *net.TCPConn (or anything
// else the net package writes with writev) that is a single vectored
// write, and the payload is never copied. The header and iovec storage is
// kept from call to call, so in the steady state WriteRecord allocates
// nothing. A writer that is not a *net.TCPConn gets the pieces as
// successive Write calls, so wrap such writers in a bufio.Writer.
//
// A RecordWriter is not safe for concurrent use: the caller serialises
// records per connection (interleaved records would corrupt the stream).
// After a write error the stream holds a partial record and cannot be
// used again; WriteRecord then returns that error forever.
type RecordWriter struct {
	w       io.Writer
	maxFrag int
	err     error

	hdrs   []byte      // 4 bytes of fragment header per fragment
	nhdr   int         // hdrs[:nhdr] belong to queued records
	iov    [][]byte    // the queued records' iovecs; storage reused
	queued int         // records in iov
	bufs   net.Buffers // what WriteTo consumes; re-sliced from iov each call

	three [3][]byte // WriteRecord's head, payload, tail as a vector for WriteRecordv

	try sockwrite.Writer // TryFlush's and Flush's writes (recordwriter_try.go)
	rc  syscall.RawConn  // w's, when w is a *net.TCPConn: Flush writes through it
}

// NewRecordWriter returns a RecordWriter over w; c may be nil.
func NewRecordWriter(w io.Writer, c *WriterConfig) *RecordWriter {
	rw := &RecordWriter{w: w, maxFrag: MaxFragmentLen, rc: rawConn(w)}
	if c != nil && c.MaxFragment > 0 && c.MaxFragment < MaxFragmentLen {
		rw.maxFrag = c.MaxFragment
	}
	rw.hdrs = make([]byte, fragmentHeaderLen)
	rw.iov = make([][]byte, 0, 4)
	return rw
}

// Reset makes rw write to w, clearing any sticky error and any records
// queued and not flushed, and keeping its storage.
func (rw *RecordWriter) Reset(w io.Writer) {
	rw.w, rw.err, rw.rc = w, nil, rawConn(w)
	rw.forget()
}

// WriteRecord sends head, payload and tail, concatenated, as one record.
// Any of them may be empty; an all-empty call sends an empty record.
// It returns once the bytes are handed to the kernel (or the writer).
//
//	+--------+------+-------------------------+------+
//	| L|len  | head | payload (caller memory) | tail |   one fragment
//	+--------+------+-------------------------+------+
//
// With MaxFragment smaller than the record, a fragment header is inserted
// every MaxFragment bytes, cutting through the three slices wherever it
// falls; the last carries the L bit.
func (rw *RecordWriter) WriteRecord(head, payload, tail []byte) error {
	rw.three = [3][]byte{head, payload, tail}
	err := rw.WriteRecordv(rw.three[:])
	rw.three = [3][]byte{} // keep no reference to the caller's buffers
	return err
}

// rawConn is w's syscall.RawConn when w is a TCP connection, which Flush
// then writes through with internal/sockwrite (small writes as raw
// system calls: internal/nbcall); nil otherwise.
func rawConn(w io.Writer) syscall.RawConn {
	tc, ok := w.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
