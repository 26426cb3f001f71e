package nfsclient

import (
	"context"
	"errors"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

var errCountMismatch = errors.New("nfsclient: READ count differs from the data length")

// Create makes (or, UNCHECKED, truncates per attrs) the regular file name
// in dir with how = CreateUnchecked or CreateGuarded and returns its handle.
func (c *V3) Create(ctx context.Context, dir []byte, name string, how uint32, attrs nfsproto.Sattr3) ([]byte, error) {
	args, err := encodeArgs(fixedArgs+len(name), func(e *xdr.Encoder) {
		putDirOp(e, dir, name)
		e.PutUint32(how)
		attrs.Encode(e)
	})
	if err != nil {
		return nil, err
	}
	return c.diropResult(ctx, nfsproto.NFS3Create, args, dir, name)
}

// Mkdir makes the directory name in dir with the given mode.
func (c *V3) Mkdir(ctx context.Context, dir []byte, name string, mode uint32) ([]byte, error) {
	args, err := encodeArgs(fixedArgs+len(name), func(e *xdr.Encoder) {
		putDirOp(e, dir, name)
		(&nfsproto.Sattr3{SetMode: true, Mode: mode}).Encode(e)
	})
	if err != nil {
		return nil, err
	}
	return c.diropResult(ctx, nfsproto.NFS3Mkdir, args, dir, name)
}

// Symlink makes the symbolic link name in dir pointing at target.
func (c *V3) Symlink(ctx context.Context, dir []byte, name, target string) ([]byte, error) {
	args, err := encodeArgs(fixedArgs+len(name)+len(target), func(e *xdr.Encoder) {
		putDirOp(e, dir, name)
		(&nfsproto.Sattr3{SetMode: true, Mode: 0o777}).Encode(e)
		e.PutString(target)
	})
	if err != nil {
		return nil, err
	}
	return c.diropResult(ctx, nfsproto.NFS3Symlink, args, dir, name)
}

// diropResult decodes the result of CREATE, MKDIR, SYMLINK (and MKNOD):
// the new object's handle, looked up if the server did not return it.
func (c *V3) diropResult(ctx context.Context, proc uint32, args, dir []byte, name string) ([]byte, error) {
	d, err := c.call(ctx, proc, args)
	if err != nil {
		return nil, err
	}
	if err := checkStatus(d); err != nil {
		return nil, err
	}
	fh := nfsproto.PostOpFH(d)
	if err := d.Err(); err != nil {
		return nil, err
	}
	if fh == nil {
		fh, _, err = c.Lookup(ctx, dir, name)
	}
	return fh, err
}

// Remove removes the non-directory name from dir.
func (c *V3) Remove(ctx context.Context, dir []byte, name string) error {
	return c.nameOp(ctx, nfsproto.NFS3Remove, dir, name)
}

// Rmdir removes the empty directory name from dir.
func (c *V3) Rmdir(ctx context.Context, dir []byte, name string) error {
	return c.nameOp(ctx, nfsproto.NFS3Rmdir, dir, name)
}

func (c *V3) nameOp(ctx context.Context, proc uint32, dir []byte, name string) error {
	args, err := encodeArgs(fixedArgs+len(name), func(e *xdr.Encoder) { putDirOp(e, dir, name) })
	if err != nil {
		return err
	}
	d, err := c.call(ctx, proc, args)
	if err != nil {
		return err
	}
	return checkStatus(d)
}

// Rename moves fromDir/fromName to toDir/toName.
func (c *V3) Rename(ctx context.Context, fromDir []byte, fromName string, toDir []byte, toName string) error {
	args, err := encodeArgs(2*fixedArgs+len(fromName)+len(toName), func(e *xdr.Encoder) {
		putDirOp(e, fromDir, fromName)
		putDirOp(e, toDir, toName)
	})
	if err != nil {
		return err
	}
	d, err := c.call(ctx, nfsproto.NFS3Rename, args)
	if err != nil {
		return err
	}
	return checkStatus(d)
}

// DirEntry is one READDIRPLUS entry.
type DirEntry struct {
	Name   string
	FileID uint64
	Cookie uint64
	Attr   *nfsproto.Fattr3 // nil when the server sent none
	FH     []byte           // nil when the server sent none
}

// ReadDirPlus lists dir completely, following cookies across as many
// READDIRPLUS calls as it takes; maxcount bounds each reply.
func (c *V3) ReadDirPlus(ctx context.Context, dir []byte, maxcount uint32) ([]DirEntry, error) {
	if maxcount == 0 {
		maxcount = 32 << 10
	}
	var out []DirEntry
	var cookie uint64
	var verf [nfsproto.VerfSize]byte
	for {
		args, err := encodeArgs(fixedArgs, func(e *xdr.Encoder) {
			e.PutOpaque(dir)
			e.PutUint64(cookie)
			e.PutFixedOpaque(verf[:])
			e.PutUint32(maxcount) // dircount
			e.PutUint32(maxcount)
		})
		if err != nil {
			return nil, err
		}
		d, err := c.call(ctx, nfsproto.NFS3Readdirplus, args)
		if err != nil {
			return nil, err
		}
		if err := checkStatus(d); err != nil {
			return nil, err
		}
		nfsproto.PostOpAttr(d)
		copy(verf[:], d.FixedOpaque(nfsproto.VerfSize))
		n := 0
		for d.Bool() {
			ent := DirEntry{FileID: d.Uint64(), Name: string(d.Opaque(nfsproto.MaxName)), Cookie: d.Uint64()}
			if a, ok := nfsproto.PostOpAttr(d); ok {
				ent.Attr = &a
			}
			ent.FH = nfsproto.PostOpFH(d)
			cookie = ent.Cookie
			out = append(out, ent)
			n++
		}
		eof := d.Bool()
		if err := d.Err(); err != nil {
			return nil, err
		}
		if eof {
			return out, nil
		}
		if n == 0 {
			return nil, errNoProgress
		}
	}
}

var errNoProgress = errors.New("nfsclient: READDIRPLUS returned no entries and no eof")

// DirPage is one READDIR reply: the entries (Attr and FH nil), the cookie
// verifier for the next call, eof, and Size, the byte length of the
// READDIR3res the server sent (what its count bounds).
type DirPage struct {
	Entries []DirEntry
	Verf    [nfsproto.VerfSize]byte
	EOF     bool
	Size    int
}

// ReadDir makes exactly one READDIR call (RFC 1813 §3.3.16) with the given
// cookie, verifier and count, so a test controls the reply size; ReadDirPlus
// is the whole-directory listing.
func (c *V3) ReadDir(ctx context.Context, dir []byte, cookie uint64, verf [nfsproto.VerfSize]byte, count uint32) (DirPage, error) {
	var p DirPage
	args, err := encodeArgs(fixedArgs, func(e *xdr.Encoder) {
		e.PutOpaque(dir)
		e.PutUint64(cookie)
		e.PutFixedOpaque(verf[:])
		e.PutUint32(count)
	})
	if err != nil {
		return p, err
	}
	res, err := c.T.Call(ctx, nfsproto.ProgNFS, nfsproto.NFSVers3, nfsproto.NFS3Readdir, args)
	if err != nil {
		return p, err
	}
	p.Size = len(res)
	d := nfsproto.NewDec(res)
	if err := checkStatus(d); err != nil {
		return p, err
	}
	nfsproto.PostOpAttr(d)
	copy(p.Verf[:], d.FixedOpaque(nfsproto.VerfSize))
	for d.Bool() {
		p.Entries = append(p.Entries, DirEntry{FileID: d.Uint64(), Name: string(d.Opaque(nfsproto.MaxName)), Cookie: d.Uint64()})
	}
	p.EOF = d.Bool()
	return p, d.Err()
}
