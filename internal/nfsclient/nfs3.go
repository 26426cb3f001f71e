package nfsclient

import (
	"context"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// V3 is an NFSv3 client (RFC 1813). File handles are the opaque []byte
// the server returned. A non-OK nfsstat3 comes back as an
// nfsproto.Status error (compare with errors.Is).
type V3 struct{ T Transport }

func (c *V3) call(ctx context.Context, proc uint32, args []byte) (*nfsproto.Dec, error) {
	res, err := c.T.Call(ctx, nfsproto.ProgNFS, nfsproto.NFSVers3, proc, args)
	if err != nil {
		return nil, err
	}
	return nfsproto.NewDec(res), nil
}

// callFH calls a procedure whose only argument is a file handle.
func (c *V3) callFH(ctx context.Context, proc uint32, fh []byte) (*nfsproto.Dec, error) {
	args, err := encodeArgs(fixedArgs, func(e *xdr.Encoder) { e.PutOpaque(fh) })
	if err != nil {
		return nil, err
	}
	return c.call(ctx, proc, args)
}

// Null pings the NFS service.
func (c *V3) Null(ctx context.Context) error {
	_, err := c.call(ctx, nfsproto.NFS3Null, nil)
	return err
}

// Getattr returns fh's attributes.
func (c *V3) Getattr(ctx context.Context, fh []byte) (nfsproto.Fattr3, error) {
	var a nfsproto.Fattr3
	d, err := c.callFH(ctx, nfsproto.NFS3Getattr, fh)
	if err != nil {
		return a, err
	}
	if err := checkStatus(d); err != nil {
		return a, err
	}
	a.Decode(d)
	return a, d.Err()
}

// Setattr changes fh's attributes (no ctime guard).
func (c *V3) Setattr(ctx context.Context, fh []byte, s nfsproto.Sattr3) error {
	args, err := encodeArgs(fixedArgs, func(e *xdr.Encoder) {
		e.PutOpaque(fh)
		s.Encode(e)
		e.PutBool(false) // sattrguard3: no check
	})
	if err != nil {
		return err
	}
	d, err := c.call(ctx, nfsproto.NFS3Setattr, args)
	if err != nil {
		return err
	}
	return checkStatus(d)
}

// Lookup finds name in dir.
func (c *V3) Lookup(ctx context.Context, dir []byte, name string) ([]byte, nfsproto.Fattr3, error) {
	var a nfsproto.Fattr3
	args, err := encodeArgs(fixedArgs+len(name), func(e *xdr.Encoder) { putDirOp(e, dir, name) })
	if err != nil {
		return nil, a, err
	}
	d, err := c.call(ctx, nfsproto.NFS3Lookup, args)
	if err != nil {
		return nil, a, err
	}
	if err := checkStatus(d); err != nil {
		return nil, a, err
	}
	fh := nfsproto.FH(d)
	a, _ = nfsproto.PostOpAttr(d)
	return fh, a, d.Err()
}

// Access asks which of the mask's ACCESS bits the caller has on fh.
func (c *V3) Access(ctx context.Context, fh []byte, mask uint32) (uint32, error) {
	args, err := encodeArgs(fixedArgs, func(e *xdr.Encoder) {
		e.PutOpaque(fh)
		e.PutUint32(mask)
	})
	if err != nil {
		return 0, err
	}
	d, err := c.call(ctx, nfsproto.NFS3Access, args)
	if err != nil {
		return 0, err
	}
	if err := checkStatus(d); err != nil {
		return 0, err
	}
	nfsproto.PostOpAttr(d)
	v := d.Uint32()
	return v, d.Err()
}

// Readlink returns a symbolic link's target.
func (c *V3) Readlink(ctx context.Context, fh []byte) (string, error) {
	d, err := c.callFH(ctx, nfsproto.NFS3Readlink, fh)
	if err != nil {
		return "", err
	}
	if err := checkStatus(d); err != nil {
		return "", err
	}
	nfsproto.PostOpAttr(d)
	p := d.Opaque(nfsproto.MaxPath)
	return string(p), d.Err()
}

// Read reads up to count bytes at off. The data is a sub-slice of the
// reply, which the caller owns.
func (c *V3) Read(ctx context.Context, fh []byte, off uint64, count uint32) (data []byte, eof bool, err error) {
	args, err := encodeArgs(fixedArgs, func(e *xdr.Encoder) {
		e.PutOpaque(fh)
		e.PutUint64(off)
		e.PutUint32(count)
	})
	if err != nil {
		return nil, false, err
	}
	d, err := c.call(ctx, nfsproto.NFS3Read, args)
	if err != nil {
		return nil, false, err
	}
	if err := checkStatus(d); err != nil {
		return nil, false, err
	}
	nfsproto.PostOpAttr(d)
	n := d.Uint32()
	eof = d.Bool()
	data = d.Opaque(-1)
	if d.Err() == nil && int(n) != len(data) {
		d.Fail(errCountMismatch)
	}
	return data, eof, d.Err()
}

// WriteResult is WRITE3resok without the wcc_data.
type WriteResult struct {
	Count     uint32
	Committed uint32 // stable_how the server achieved
	Verf      [nfsproto.VerfSize]byte
}

// Write writes data at off with the given stable_how.
func (c *V3) Write(ctx context.Context, fh []byte, off uint64, data []byte, stable uint32) (WriteResult, error) {
	var r WriteResult
	buf := newArgsBuf(c.T, fixedArgs+len(data))
	defer buf.release()
	args, err := encodeArgsInto(buf.b, func(e *xdr.Encoder) {
		e.PutOpaque(fh)
		e.PutUint64(off)
		e.PutUint32(uint32(len(data)))
		e.PutUint32(stable)
		e.PutOpaque(data)
	})
	if err != nil {
		return r, err
	}
	res, err := buf.call(ctx, c.T, nfsproto.ProgNFS, nfsproto.NFSVers3, nfsproto.NFS3Write, args)
	if err != nil {
		return r, err
	}
	d := nfsproto.NewDec(res)
	if err := checkStatus(d); err != nil {
		return r, err
	}
	var wcc nfsproto.Wcc
	wcc.Decode(d)
	r.Count = d.Uint32()
	r.Committed = d.Uint32()
	copy(r.Verf[:], d.FixedOpaque(nfsproto.VerfSize))
	return r, d.Err()
}

// Commit flushes count bytes at off (0, 0: the whole file) to stable
// storage and returns the write verifier.
func (c *V3) Commit(ctx context.Context, fh []byte, off uint64, count uint32) ([nfsproto.VerfSize]byte, error) {
	var v [nfsproto.VerfSize]byte
	args, err := encodeArgs(fixedArgs, func(e *xdr.Encoder) {
		e.PutOpaque(fh)
		e.PutUint64(off)
		e.PutUint32(count)
	})
	if err != nil {
		return v, err
	}
	d, err := c.call(ctx, nfsproto.NFS3Commit, args)
	if err != nil {
		return v, err
	}
	if err := checkStatus(d); err != nil {
		return v, err
	}
	var wcc nfsproto.Wcc
	wcc.Decode(d)
	copy(v[:], d.FixedOpaque(nfsproto.VerfSize))
	return v, d.Err()
}
