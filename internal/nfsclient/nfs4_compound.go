package nfsclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// NFSv4 operation numbers used here (RFC 8881 §16.2).
const (
	op4Close          = 4
	op4Commit         = 5
	op4Getattr        = 9
	op4Getfh          = 10
	op4Lookup         = 15
	op4Open           = 18
	op4Putfh          = 22
	op4Putrootfh      = 24
	op4Read           = 25
	op4Remove         = 28
	op4Write          = 38
	op4ExchangeID     = 42
	op4CreateSession  = 43
	op4DestroySession = 44
	op4Sequence       = 53
	op4DestroyClient  = 57
	op4ReclaimDone    = 58
)

const (
	proc4Null     = 0
	proc4Compound = 1
	fh4Max        = 128 // NFS4_FHSIZE
	sessionIDLen  = 16
	stateidLen    = 16
	opaqueLimit   = 1024 // NFS4_OPAQUE_LIMIT
)

// compound encodes a COMPOUND4args of n operations (minor version 1)
// with put writing the operations, calls it, and returns a decoder
// positioned at the first operation's result. The operations' results
// follow in order up to the first failure; callers read them with result,
// which reports that failure as an *OpError.
func (c *V4) compound(ctx context.Context, size, n int, put func(e *xdr.Encoder)) (*nfsproto.Dec, error) {
	buf := newArgsBuf(c.T, size+64) // a WRITE's data: see argsBuf
	defer buf.release()
	args, err := encodeArgsInto(buf.b, func(e *xdr.Encoder) {
		e.PutString("") // tag
		e.PutUint32(1)  // minorversion
		e.PutUint32(uint32(n))
		put(e)
	})
	if err != nil {
		return nil, err
	}
	res, err := buf.call(ctx, c.T, nfsproto.ProgNFS, nfsproto.NFSVers4, proc4Compound, args)
	if err != nil {
		return nil, err
	}
	d := nfsproto.NewDec(res)
	d.Uint32()            // overall status: the failing op's, read from it
	d.Opaque(opaqueLimit) // tag
	d.Uint32()            // number of results
	return d, d.Err()
}

// result reads the header of an operation's result: it must be op, with
// NFS4_OK.
func result(d *nfsproto.Dec, op uint32) error {
	got := d.Uint32()
	st := Status4(d.Uint32())
	if err := d.Err(); err != nil {
		return err
	}
	if got != op {
		return fmt.Errorf("nfs4: result for op %d where op %d was expected", got, op)
	}
	if st != NFS4OK {
		return &OpError{Op: op, Status: st}
	}
	return nil
}

// errNoSession: a call needing a session before Setup.
var errNoSession = errors.New("nfs4: no session (call Setup first)")
