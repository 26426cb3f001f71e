package tcprpc

import "encoding/binary"

// WriteRecordv sends the concatenation of vec as one record, with one
// vectored write, like WriteRecord but for any number of slices: a
// gateway forwards an RPC call that arrived in pieces (inline bytes, a
// WRITE payload in the registered buffer an RDMA Read filled, its XDR pad,
// more inline bytes) without gathering it first. Empty slices are
// skipped. Records queued with AppendRecordv and not yet flushed go out
// first, in the same write. The iovec and header storage is reused from
// call to call, so the steady state allocates nothing once it has grown to
// the longest vector seen.
func (rw *RecordWriter) WriteRecordv(vec [][]byte) error {
	if err := rw.AppendRecordv(vec); err != nil {
		return err
	}
	return rw.Flush()
}

// AppendRecordv queues the concatenation of vec as one record without
// writing it: Flush sends every queued record with one vectored write, so
// a writer that finds several records ready (calls queued for a backend,
// replies for a client) pays one system call for all of them. The slices
// are referenced, not copied: the caller leaves them (and vec's backing
// array is free to reuse at once) unchanged until Flush returns. The
// storage grows to the largest batch seen and is then reused, so the
// steady state allocates nothing.
//
// It fails only with the writer's sticky error or errRecordOverflow (the
// record's length overflows an int); nothing is queued then.
func (rw *RecordWriter) AppendRecordv(vec [][]byte) error {
	if rw.err != nil {
		return rw.err
	}
	total := 0
	for _, b := range vec {
		n := total + len(b)
		if n < total {
			return errRecordOverflow
		}
		total = n
	}
	nfrags := 1
	if total > 0 {
		nfrags = (total-1)/rw.maxFrag + 1
	}
	if need := rw.nhdr + nfrags*fragmentHeaderLen; len(rw.hdrs) < need {
		// Queued records keep pointing into the old array, which holds
		// their headers until Flush; later batches use the new one.
		rw.hdrs = make([]byte, max(need, 2*len(rw.hdrs)))
		rw.nhdr = 0
	}
	iov := rw.iov
	vi, voff := 0, 0 // next unsent byte: vec[vi][voff:]
	left := total
	for range nfrags {
		n := min(left, rw.maxFrag)
		left -= n
		h := rw.hdrs[rw.nhdr : rw.nhdr+fragmentHeaderLen]
		rw.nhdr += fragmentHeaderLen
		v := uint32(n)
		if left == 0 {
			v |= lastFragment
		}
		binary.BigEndian.PutUint32(h, v)
		iov = append(iov, h)
		for n > 0 {
			for voff == len(vec[vi]) {
				vi, voff = vi+1, 0
			}
			c := min(n, len(vec[vi])-voff)
			iov = append(iov, vec[vi][voff:voff+c])
			voff += c
			n -= c
		}
	}
	rw.iov = iov
	rw.queued++
	return nil
}

// Queued is the number of records AppendRecordv queued since the last
// Flush.
func (rw *RecordWriter) Queued() int { return rw.queued }

// Flush writes the queued records with one vectored write (writev on a
// *net.TCPConn, through internal/sockwrite; the kernel's IOV_MAX may
// split a very long batch into several) and forgets them. With nothing
// queued it writes nothing. After a write error the stream may end
// inside a record: the error is sticky.
func (rw *RecordWriter) Flush() error {
	if rw.queued == 0 {
		return rw.err
	}
	if rw.bufs == nil { // else TryFlush left the rest of them
		rw.bufs = rw.iov
	}
	var err error
	if rw.rc != nil {
		_, err = rw.try.WriteAll(rw.rc, rw.bufs)
	} else {
		_, err = rw.bufs.WriteTo(rw.w)
	}
	rw.forget()
	if err != nil {
		rw.err = err
	}
	return err
}

// forget drops the queued records once written (or failed).
func (rw *RecordWriter) forget() {
	clear(rw.iov) // keep no reference to the caller's buffers
	rw.iov = rw.iov[:0]
	rw.bufs = nil
	rw.nhdr, rw.queued = 0, 0
}
