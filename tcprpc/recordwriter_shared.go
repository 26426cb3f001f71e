package tcprpc

import (
	"io"
	"sync"
)

// SharedRecordWriter is a RecordWriter for several goroutines at once
// (say, the workers that answer a TCP client's calls): each WriteRecordv
// call sends one record and returns once it is handed to the kernel, and
// the records of callers that arrive while a write is in progress go out
// together in the next one, one vectored write for all of them (one
// writev on a *net.TCPConn). Nobody waits for a timer and no goroutine
// is added: the first caller to find no write in progress writes the
// records gathered so far, its own included, while the others wait for
// it (a write in progress is the only thing anyone waits for).
//
// The records of concurrent callers are never interleaved; their order
// is the order in which the callers got the writer's lock. After a write
// error every caller whose record was not written, and every later
// caller, gets that error: the stream may end inside a record. The
// storage grows to the most records waiting at once and is then reused,
// so the steady state allocates nothing.
type SharedRecordWriter struct {
	mu       sync.Mutex
	cond     sync.Cond // signalled when a write ends
	rw       *RecordWriter
	flushing bool       // a caller is writing (outside mu)
	waiting  [][][]byte // the records gathered for the next write, in order
	spare    [][][]byte // the previous write's storage, swapped with waiting
	next     uint64     // the id of the write waiting gathers for
	done     uint64     // the last write completed without error
	err      error      // the first write error; sticky
	errAt    uint64     // the id of the write that failed
	hook     func(records int)
}

// NewSharedRecordWriter returns a SharedRecordWriter over w; c may be
// nil. See RecordWriter for what w should be.
func NewSharedRecordWriter(w io.Writer, c *WriterConfig) *SharedRecordWriter {
	sw := &SharedRecordWriter{rw: NewRecordWriter(w, c), next: 1}
	sw.cond.L = &sw.mu
	return sw
}

// WriteRecordv sends the concatenation of vec as one record (see
// RecordWriter.WriteRecordv), together with the records of other callers
// waiting at the same time. The caller leaves vec and the slices in it
// unchanged until WriteRecordv returns. It is safe for concurrent use.
func (sw *SharedRecordWriter) WriteRecordv(vec [][]byte) error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.err != nil {
		return sw.err
	}
	sw.waiting = append(sw.waiting, vec)
	mine := sw.next
	for {
		switch {
		case sw.err != nil && mine >= sw.errAt:
			return sw.err
		case sw.done >= mine:
			return nil
		case !sw.flushing:
			sw.write()
		default:
			sw.cond.Wait()
		}
	}
}

// write sends the records gathered in waiting with one vectored write.
// It is called with mu held, and lets go of it during the write.
func (sw *SharedRecordWriter) write() {
	sw.flushing = true
	id := sw.next
	sw.next++
	batch := sw.waiting
	sw.waiting = sw.spare[:0]
	var err error
	for _, v := range batch {
		if err = sw.rw.AppendRecordv(v); err != nil {
			break
		}
	}
	if hook := sw.hook; hook != nil {
		hook(len(batch))
	}
	sw.mu.Unlock()
	if err == nil {
		err = sw.rw.Flush()
	}
	sw.mu.Lock()
	clear(batch) // keep no reference to the callers' buffers
	sw.spare = batch[:0]
	sw.flushing = false
	if err != nil {
		sw.err, sw.errAt = err, id
	} else {
		sw.done = id
	}
	sw.cond.Broadcast()
}
