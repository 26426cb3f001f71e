package nfsclient

import (
	"context"
	"sync"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// encodeArgs runs put on an encoder over a buffer of size bytes and
// returns what it wrote. size is an upper bound the caller computes from
// the variable parts (names, data); an overflow is a bug and reported.
func encodeArgs(size int, put func(e *xdr.Encoder)) ([]byte, error) {
	return encodeArgsInto(make([]byte, size), put)
}

// encodeArgsInto is encodeArgs into buf, whose length is the bound.
func encodeArgsInto(buf []byte, put func(e *xdr.Encoder)) ([]byte, error) {
	e := xdr.NewEncoder(buf)
	put(&e)
	if err := e.Err(); err != nil {
		return nil, err
	}
	return e.Bytes(), nil
}

// fixedArgs bounds arguments made of handles, counters and a sattr3.
const fixedArgs = 512

// putDirOp writes diropargs3.
func putDirOp(e *xdr.Encoder, dir []byte, name string) {
	e.PutOpaque(dir)
	e.PutString(name)
}

// checkStatus reads an nfsstat3 and returns it as an error when it is not
// NFS3_OK (nil otherwise).
func checkStatus(d *nfsproto.Dec) error {
	st := nfsproto.Status(d.Uint32())
	if err := d.Err(); err != nil {
		return err
	}
	if st != nfsproto.NFS3OK {
		return st
	}
	return nil
}

// bulkArgs recycles the argument buffers of calls that carry data (WRITE).
// A client writing 1 MiB a call would otherwise allocate a megabyte per
// call, which the runtime clears and the GC then collects: in rdmagw bench
// write-1m that was a fifth of the client's CPU, on both transports.
// Transport.Call is done with its args when it returns (the TCP transport
// has written them, the RDMA transport has sent them or copied them into
// registered memory), so the buffer goes back then.
var bulkArgs sync.Pool // *[]byte

// getBulkArgs returns a buffer of size bytes from bulkArgs (a pooled one
// too small is dropped for a new one).
func getBulkArgs(size int) *[]byte {
	if p, _ := bulkArgs.Get().(*[]byte); p != nil && cap(*p) >= size {
		*p = (*p)[:size]
		return p
	}
	b := make([]byte, size)
	return &b
}

// argsBuf is the buffer a call carrying data is encoded into: on the RDMA
// transport a buffer of its requester's registered pool, from which the
// requester sends the arguments (a WRITE's data as a Read chunk) without
// copying them, as the Linux client registers a WRITE's pages instead of
// copying them; otherwise (another transport, no pool buffer that large
// or free) one from bulkArgs. release gives it back after the call.
type argsBuf struct {
	b      []byte
	reg    *rdmarpc.Buffer // the registered buffer b is in, or nil
	pooled *[]byte         // the bulkArgs buffer b is, or nil
}

func newArgsBuf(t Transport, size int) argsBuf {
	if r, ok := t.(*RDMA); ok {
		if b, err := r.conn.Pool().Get(size); err == nil {
			return argsBuf{b: b.Bytes[:size], reg: b}
		}
	}
	p := getBulkArgs(size)
	return argsBuf{b: *p, pooled: p}
}

func (a *argsBuf) release() {
	if a.reg != nil {
		a.reg.Release()
	} else {
		bulkArgs.Put(a.pooled)
	}
}

// call makes the call with args encoded in a: on the transport a's
// registered buffer came from, that buffer goes with them.
func (a *argsBuf) call(ctx context.Context, t Transport, prog, vers, proc uint32, args []byte) ([]byte, error) {
	if r, ok := t.(*RDMA); ok && a.reg != nil {
		return r.call(ctx, prog, vers, proc, args, a.reg)
	}
	return t.Call(ctx, prog, vers, proc, args)
}
