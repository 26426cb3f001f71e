package nfsclient

import (
	"context"
	"encoding/binary"
	"strings"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// LookupPath resolves path (components separated by "/") from the
// server's root and returns its handle and attributes: PUTROOTFH,
// LOOKUP per component, GETFH, GETATTR.
func (c *V4) LookupPath(ctx context.Context, path string) ([]byte, Attr4, error) {
	var comps []string
	size := 0
	for _, p := range strings.Split(path, "/") {
		if p != "" {
			comps = append(comps, p)
			size += 8 + len(p)
		}
	}
	d, err := c.seqCompound(ctx, size+64, len(comps)+3, func(e *xdr.Encoder) {
		e.PutUint32(op4Putrootfh)
		for _, p := range comps {
			e.PutUint32(op4Lookup)
			e.PutString(p)
		}
		e.PutUint32(op4Getfh)
		putGetattr(e)
	})
	if err != nil {
		return nil, Attr4{}, err
	}
	if err := result(d, op4Putrootfh); err != nil {
		return nil, Attr4{}, err
	}
	for range comps {
		if err := result(d, op4Lookup); err != nil {
			return nil, Attr4{}, err
		}
	}
	return fhAndAttrs(d)
}

// fhAndAttrs reads the results of GETFH and GETATTR.
func fhAndAttrs(d *nfsproto.Dec) ([]byte, Attr4, error) {
	if err := result(d, op4Getfh); err != nil {
		return nil, Attr4{}, err
	}
	fh := append([]byte{}, d.Opaque(fh4Max)...)
	if err := result(d, op4Getattr); err != nil {
		return nil, Attr4{}, err
	}
	a := decodeFattr4(d)
	return fh, a, d.Err()
}

// putFH writes PUTFH fh.
func putFH(e *xdr.Encoder, fh []byte) {
	e.PutUint32(op4Putfh)
	e.PutOpaque(fh)
}

// Getattr returns fh's attributes (PUTFH, GETATTR).
func (c *V4) Getattr(ctx context.Context, fh []byte) (Attr4, error) {
	d, err := c.seqCompound(ctx, 160, 2, func(e *xdr.Encoder) {
		putFH(e, fh)
		putGetattr(e)
	})
	if err != nil {
		return Attr4{}, err
	}
	if err := result(d, op4Putfh); err != nil {
		return Attr4{}, err
	}
	if err := result(d, op4Getattr); err != nil {
		return Attr4{}, err
	}
	a := decodeFattr4(d)
	return a, d.Err()
}

// Open4 is an open file: its handle and open stateid.
type Open4 struct {
	FH      []byte
	Stateid [stateidLen]byte
}

// Open opens name in dir for reading and writing, creating it (UNCHECKED,
// mode 0644) when create is set: PUTFH, OPEN, GETFH.
func (c *V4) Open(ctx context.Context, dir []byte, name string, create bool) (*Open4, error) {
	var owner [8]byte
	binary.BigEndian.PutUint64(owner[:], atomic.AddUint64(&c.ownerSeq, 1))
	d, err := c.seqCompound(ctx, 256+len(name), 3, func(e *xdr.Encoder) {
		putFH(e, dir)
		e.PutUint32(op4Open)
		e.PutUint32(0) // seqid: unused in 4.1
		e.PutUint32(3) // share_access: BOTH
		e.PutUint32(0) // share_deny: NONE
		e.PutUint64(c.clientID)
		e.PutOpaque(owner[:])
		if create {
			e.PutUint32(1) // OPEN4_CREATE
			e.PutUint32(0) // UNCHECKED4
			e.PutUint32(2) // createattrs: bitmap of 2 words, mode only
			e.PutUint32(0)
			e.PutUint32(1 << (fattr4Mode - 32))
			e.PutUint32(4) // attr_vals length
			e.PutUint32(0o644)
		} else {
			e.PutUint32(0) // OPEN4_NOCREATE
		}
		e.PutUint32(0) // CLAIM_NULL
		e.PutString(name)
		e.PutUint32(op4Getfh)
	})
	if err != nil {
		return nil, err
	}
	if err := result(d, op4Putfh); err != nil {
		return nil, err
	}
	if err := result(d, op4Open); err != nil {
		return nil, err
	}
	f := &Open4{}
	copy(f.Stateid[:], d.FixedOpaque(stateidLen))
	d.Bool() // change_info4: atomic, before, after
	d.Uint64()
	d.Uint64()
	d.Uint32() // rflags
	skipBitmap(d)
	skipDelegation(d)
	if err := d.Err(); err != nil {
		return nil, err
	}
	if err := result(d, op4Getfh); err != nil {
		return nil, err
	}
	f.FH = append([]byte{}, d.Opaque(fh4Max)...)
	return f, d.Err()
}

func skipBitmap(d *nfsproto.Dec) {
	n := d.Uint32()
	if n > 8 {
		d.Fail(nfsproto.ErrBadEnum)
		return
	}
	for range n {
		d.Uint32()
	}
}

// skipDelegation reads an open_delegation4: we never ask for
// delegations, but a server may grant one.
func skipDelegation(d *nfsproto.Dec) {
	switch kind := d.Uint32(); kind {
	case 0: // OPEN_DELEGATE_NONE
	case 1, 2: // READ, WRITE: stateid, recall, [space limit,] permissions
		d.FixedOpaque(stateidLen)
		d.Bool()
		if kind == 2 {
			switch d.Uint32() { // nfs_space_limit4
			case 1: // NFS_LIMIT_SIZE
				d.Uint64()
			case 2: // NFS_LIMIT_BLOCKS
				d.Uint32()
				d.Uint32()
			default:
				d.Fail(nfsproto.ErrBadEnum)
			}
		}
		d.Uint32() // nfsace4: type, flag, access mask, who
		d.Uint32()
		d.Uint32()
		d.Opaque(opaqueLimit)
	case 3: // OPEN_DELEGATE_NONE_EXT: why, and for two reasons a bool
		why := d.Uint32()
		if why == 1 || why == 2 { // WND4_CONTENTION, WND4_RESOURCE
			d.Bool()
		}
	default:
		d.Fail(nfsproto.ErrBadEnum)
	}
}

// Write writes data at off through the open f (PUTFH, WRITE).
func (c *V4) Write(ctx context.Context, f *Open4, off uint64, data []byte, stable uint32) (WriteResult, error) {
	var r WriteResult
	d, err := c.seqCompound(ctx, 200+len(data), 2, func(e *xdr.Encoder) {
		putFH(e, f.FH)
		e.PutUint32(op4Write)
		e.PutFixedOpaque(f.Stateid[:])
		e.PutUint64(off)
		e.PutUint32(stable)
		e.PutOpaque(data)
	})
	if err != nil {
		return r, err
	}
	if err := result(d, op4Putfh); err != nil {
		return r, err
	}
	if err := result(d, op4Write); err != nil {
		return r, err
	}
	r.Count = d.Uint32()
	r.Committed = d.Uint32()
	copy(r.Verf[:], d.FixedOpaque(nfsproto.VerfSize))
	return r, d.Err()
}

// Read reads up to count bytes at off through the open f (PUTFH, READ).
func (c *V4) Read(ctx context.Context, f *Open4, off uint64, count uint32) ([]byte, bool, error) {
	d, err := c.seqCompound(ctx, 200, 2, func(e *xdr.Encoder) {
		putFH(e, f.FH)
		e.PutUint32(op4Read)
		e.PutFixedOpaque(f.Stateid[:])
		e.PutUint64(off)
		e.PutUint32(count)
	})
	if err != nil {
		return nil, false, err
	}
	if err := result(d, op4Putfh); err != nil {
		return nil, false, err
	}
	if err := result(d, op4Read); err != nil {
		return nil, false, err
	}
	eof := d.Bool()
	data := d.Opaque(-1)
	return data, eof, d.Err()
}

// Commit commits the file's unstable writes (PUTFH, COMMIT).
func (c *V4) Commit(ctx context.Context, f *Open4) ([nfsproto.VerfSize]byte, error) {
	var v [nfsproto.VerfSize]byte
	d, err := c.seqCompound(ctx, 200, 2, func(e *xdr.Encoder) {
		putFH(e, f.FH)
		e.PutUint32(op4Commit)
		e.PutUint64(0)
		e.PutUint32(0)
	})
	if err != nil {
		return v, err
	}
	if err := result(d, op4Putfh); err != nil {
		return v, err
	}
	if err := result(d, op4Commit); err != nil {
		return v, err
	}
	copy(v[:], d.FixedOpaque(nfsproto.VerfSize))
	return v, d.Err()
}

// Close closes f (PUTFH, CLOSE).
func (c *V4) Close(ctx context.Context, f *Open4) error {
	d, err := c.seqCompound(ctx, 200, 2, func(e *xdr.Encoder) {
		putFH(e, f.FH)
		e.PutUint32(op4Close)
		e.PutUint32(0) // seqid: unused in 4.1
		e.PutFixedOpaque(f.Stateid[:])
	})
	if err != nil {
		return err
	}
	if err := result(d, op4Putfh); err != nil {
		return err
	}
	return result(d, op4Close)
}

// Remove removes name from dir (PUTFH, REMOVE).
func (c *V4) Remove(ctx context.Context, dir []byte, name string) error {
	d, err := c.seqCompound(ctx, 200+len(name), 2, func(e *xdr.Encoder) {
		putFH(e, dir)
		e.PutUint32(op4Remove)
		e.PutString(name)
	})
	if err != nil {
		return err
	}
	if err := result(d, op4Putfh); err != nil {
		return err
	}
	return result(d, op4Remove)
}
