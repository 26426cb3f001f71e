package nfsproto

import "github.com/rdmagw/rdmagw/xdr"

// Dec decodes XDR with a sticky error: after the first failure every
// method returns zero values and Err reports that failure.
type Dec struct {
	d   xdr.Decoder
	err error
}

// NewDec returns a Dec over b.
func NewDec(b []byte) *Dec { return &Dec{d: xdr.NewDecoder(b)} }

// Err is the first decode failure, or nil.
func (d *Dec) Err() error { return d.err }

// Fail records err (if none is recorded yet): for semantic checks such as
// an enum out of range.
func (d *Dec) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Len is the number of bytes left.
func (d *Dec) Len() int { return d.d.Len() }

// Offset is the number of bytes consumed.
func (d *Dec) Offset() int { return d.d.Offset() }

func (d *Dec) U32() uint32 {
	if d.err != nil {
		return 0
	}
	v, err := d.d.Uint32()
	d.err = err
	return v
}

func (d *Dec) U64() uint64 {
	if d.err != nil {
		return 0
	}
	v, err := d.d.Uint64()
	d.err = err
	return v
}

func (d *Dec) Bool() bool {
	if d.err != nil {
		return false
	}
	v, err := d.d.Bool()
	d.err = err
	return v
}

// Opaque reads a variable-length opaque of at most max bytes (max < 0: no
// limit) as a sub-slice of the input.
func (d *Dec) Opaque(max int) []byte {
	if d.err != nil {
		return nil
	}
	v, err := d.d.Opaque(max)
	d.err = err
	return v
}

// Fixed reads n bytes plus their XDR pad as a sub-slice.
func (d *Dec) Fixed(n int) []byte {
	if d.err != nil {
		return nil
	}
	v, err := d.d.FixedOpaque(n)
	d.err = err
	return v
}

// Time reads an nfstime3 (seconds, nanoseconds).
func (d *Dec) Time() Time { return Time{Sec: d.U32(), Nsec: d.U32()} }
