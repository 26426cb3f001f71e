package tcprpc

import "encoding/binary"

// WriteRecordv sends the concatenation of vec as one record, with one
// vectored write, like WriteRecord but for any number of slices: a
// gateway forwards an RPC call that arrived in pieces (inline bytes, a
// WRITE payload in the registered buffer an RDMA Read filled, its XDR pad,
// more inline bytes) without gathering it first. Empty slices are
// skipped. The iovec and header storage is reused from call to call, so
// the steady state allocates nothing once it has grown to the longest
// vector seen.
func (rw *RecordWriter) WriteRecordv(vec [][]byte) error {
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
	if need := nfrags * fragmentHeaderLen; len(rw.hdrs) < need {
		rw.hdrs = make([]byte, need)
	}

	iov := rw.iov[:0]
	vi, voff := 0, 0 // next unsent byte: vec[vi][voff:]
	left := total
	for f := range nfrags {
		n := min(left, rw.maxFrag)
		left -= n
		h := rw.hdrs[f*fragmentHeaderLen : (f+1)*fragmentHeaderLen]
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
	rw.bufs = iov
	_, err := rw.bufs.WriteTo(rw.w)
	clear(rw.iov)
	rw.bufs = nil
	if err != nil {
		rw.err = err
	}
	return err
}
