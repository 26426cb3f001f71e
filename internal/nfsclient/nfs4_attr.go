package nfsclient

import (
	"context"
	"fmt"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// Attr4 is the handful of NFSv4 attributes the client asks for.
type Attr4 struct {
	Type     uint32 // nfs_ftype4: 1 regular, 2 directory, 5 symlink
	Change   uint64
	Size     uint64
	FileID   uint64
	Mode     uint32
	NumLinks uint32
	Mtime    nfsproto.Time // seconds truncated to 32 bits
}

// Attribute numbers (RFC 8881 §5.8) and the bitmap asking for Attr4.
const (
	fattr4Type       = 1
	fattr4Change     = 3
	fattr4Size       = 4
	fattr4FileID     = 20
	fattr4Mode       = 33
	fattr4NumLinks   = 35
	fattr4TimeModify = 53
)

var attr4Want = [2]uint32{
	1<<fattr4Type | 1<<fattr4Change | 1<<fattr4Size | 1<<fattr4FileID,
	1<<(fattr4Mode-32) | 1<<(fattr4NumLinks-32) | 1<<(fattr4TimeModify-32),
}

// putGetattr writes a GETATTR of Attr4's attributes.
func putGetattr(e *xdr.Encoder) {
	e.PutUint32(op4Getattr)
	e.PutUint32(2)
	e.PutUint32(attr4Want[0])
	e.PutUint32(attr4Want[1])
}

// decodeFattr4 reads a fattr4 whose attributes are among those we ask
// for. Values come in attribute-number order; an attribute we did not
// ask for (a server may not add any, RFC 8881 §5.5) makes the rest
// unreadable, so it fails the decode.
func decodeFattr4(d *nfsproto.Dec) Attr4 {
	var a Attr4
	n := int(d.Uint32())
	if n > 8 {
		d.Fail(nfsproto.ErrBadEnum)
		return a
	}
	var mask [8]uint32
	for i := range n {
		mask[i] = d.Uint32()
	}
	vals := nfsproto.NewDec(d.Opaque(-1))
	if mask[0]&^attr4Want[0] != 0 || mask[1]&^attr4Want[1] != 0 {
		d.Fail(nfsproto.ErrBadEnum)
		return a
	}
	has := func(bit int) bool { return mask[bit/32]&(1<<(bit%32)) != 0 }
	if has(fattr4Type) {
		a.Type = vals.Uint32()
	}
	if has(fattr4Change) {
		a.Change = vals.Uint64()
	}
	if has(fattr4Size) {
		a.Size = vals.Uint64()
	}
	if has(fattr4FileID) {
		a.FileID = vals.Uint64()
	}
	if has(fattr4Mode) {
		a.Mode = vals.Uint32()
	}
	if has(fattr4NumLinks) {
		a.NumLinks = vals.Uint32()
	}
	if has(fattr4TimeModify) {
		sec := vals.Uint64()
		a.Mtime = nfsproto.Time{Sec: uint32(sec), Nsec: vals.Uint32()}
	}
	if err := vals.Err(); err != nil {
		d.Fail(err)
	}
	return a
}

// TransferLimits returns the maxread and maxwrite attributes of fh
// (PUTFH, GETATTR of just those two).
func (c *V4) TransferLimits(ctx context.Context, fh []byte) (maxRead, maxWrite uint64, err error) {
	d, err := c.seqCompound(ctx, 160, 2, func(e *xdr.Encoder) {
		putFH(e, fh)
		e.PutUint32(op4Getattr)
		e.PutUint32(1)
		e.PutUint32(1<<30 | 1<<31) // maxread, maxwrite
	})
	if err != nil {
		return 0, 0, err
	}
	if err := result(d, op4Putfh); err != nil {
		return 0, 0, err
	}
	if err := result(d, op4Getattr); err != nil {
		return 0, 0, err
	}
	n := d.Uint32()
	if n < 1 || d.Uint32() != 1<<30|1<<31 {
		return 0, 0, fmt.Errorf("nfsclient: GETATTR maxread/maxwrite returned another bitmap")
	}
	for range min(n-1, 8) {
		d.Uint32()
	}
	d.Uint32() // attrlist4 length
	maxRead, maxWrite = d.Uint64(), d.Uint64()
	return maxRead, maxWrite, d.Err()
}
