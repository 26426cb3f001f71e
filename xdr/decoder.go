package xdr

import "encoding/binary"

// Decoder reads XDR items from a byte slice owned by the caller. The zero
// value decodes an empty buffer; Reset points it at another one without
// allocating.
type Decoder struct {
	buf []byte
	off int
}

// NewDecoder returns a Decoder reading b from offset 0.
func NewDecoder(b []byte) Decoder { return Decoder{buf: b} }

// Reset makes d read b from offset 0.
func (d *Decoder) Reset(b []byte) { d.buf, d.off = b, 0 }

// Offset is the number of bytes consumed so far.
func (d *Decoder) Offset() int { return d.off }

// Len is the number of bytes not yet consumed.
func (d *Decoder) Len() int { return len(d.buf) - d.off }

// Rest returns the unconsumed bytes (a sub-slice, not a copy).
func (d *Decoder) Rest() []byte { return d.buf[d.off:] }

// Buffer returns the whole input slice.
func (d *Decoder) Buffer() []byte { return d.buf }

func (d *Decoder) short(op string, want int) error {
	return &Error{Op: op, Offset: d.off, Want: want, Have: len(d.buf) - d.off, Err: ErrShort}
}

// Uint32 reads an unsigned int.
func (d *Decoder) Uint32() (uint32, error) {
	if len(d.buf)-d.off < 4 {
		return 0, d.short("uint32", 4)
	}
	v := binary.BigEndian.Uint32(d.buf[d.off:])
	d.off += 4
	return v, nil
}

// Int32 reads an int.
func (d *Decoder) Int32() (int32, error) {
	v, err := d.Uint32()
	return int32(v), err
}

// Enum reads an enum. Whether the value is a member is the caller's check.
func (d *Decoder) Enum() (int32, error) { return d.Int32() }

// Uint64 reads an unsigned hyper.
func (d *Decoder) Uint64() (uint64, error) {
	if len(d.buf)-d.off < 8 {
		return 0, d.short("uint64", 8)
	}
	v := binary.BigEndian.Uint64(d.buf[d.off:])
	d.off += 8
	return v, nil
}

// Int64 reads a hyper.
func (d *Decoder) Int64() (int64, error) {
	v, err := d.Uint64()
	return int64(v), err
}

// Bool reads a bool; values other than 0 and 1 are an error.
func (d *Decoder) Bool() (bool, error) { return d.boolean("bool") }

// Optional reads the discriminant of optional-data (`*T` in XDR): true when
// an item follows.
func (d *Decoder) Optional() (bool, error) { return d.boolean("optional") }

func (d *Decoder) boolean(op string) (bool, error) {
	at := d.off
	v, err := d.Uint32()
	if err != nil {
		return false, d.rename(err, op)
	}
	switch v {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	d.off = at
	return false, &Error{Op: op, Offset: at, Want: int(v), Err: ErrBadBool}
}

func (d *Decoder) rename(err error, op string) error {
	if e, ok := err.(*Error); ok {
		e.Op = op
	}
	return err
}

// FixedOpaque reads n bytes of fixed-length opaque data and its padding,
// returning the n bytes as a sub-slice of the input.
func (d *Decoder) FixedOpaque(n int) ([]byte, error) {
	return d.fixed("fixed opaque", n)
}

func (d *Decoder) fixed(op string, n int) ([]byte, error) {
	total := RoundUp(n)
	if n < 0 || total < n || len(d.buf)-d.off < total {
		return nil, d.short(op, total)
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += total
	return b, nil
}

// Opaque reads variable-length opaque data of at most max bytes (max < 0
// means no limit but the input's own length) and returns it as a sub-slice.
// Pad bytes are skipped, not checked: RFC 4506 says they are zero, and
// peers that violate that are tolerated as every RPC implementation does.
func (d *Decoder) Opaque(max int) ([]byte, error) { return d.variable("opaque", max) }

// String reads an XDR string of at most max bytes as a sub-slice (no
// conversion, so no allocation).
func (d *Decoder) String(max int) ([]byte, error) { return d.variable("string", max) }

func (d *Decoder) variable(op string, max int) ([]byte, error) {
	at := d.off
	n, err := d.Uint32()
	if err != nil {
		return nil, d.rename(err, op)
	}
	if max >= 0 && uint64(n) > uint64(max) {
		d.off = at
		return nil, &Error{Op: op, Offset: at, Want: int(n), Have: max, Err: ErrTooLong}
	}
	if uint64(n) > uint64(len(d.buf)-d.off) {
		e := d.short(op, int(n))
		d.off = at
		return nil, e
	}
	b, err := d.fixed(op, int(n))
	if err != nil {
		d.off = at
	}
	return b, err
}

// SkipOpaque skips variable-length opaque data of at most max bytes.
func (d *Decoder) SkipOpaque(max int) error {
	_, err := d.variable("opaque", max)
	return err
}

// ArrayLen reads the count of a counted array and checks it against max
// (max < 0: no limit) and against the input: each element is at least
// minElem bytes, so a count that could not fit in what is left is rejected
// before the caller loops over it.
func (d *Decoder) ArrayLen(max, minElem int) (int, error) {
	at := d.off
	n, err := d.Uint32()
	if err != nil {
		return 0, d.rename(err, "array count")
	}
	if max >= 0 && uint64(n) > uint64(max) {
		d.off = at
		return 0, &Error{Op: "array count", Offset: at, Want: int(n), Have: max, Err: ErrTooLong}
	}
	if minElem > 0 && uint64(n)*uint64(minElem) > uint64(len(d.buf)-d.off) {
		e := d.short("array", int(uint64(n)*uint64(minElem)))
		d.off = at
		return 0, e
	}
	return int(n), nil
}

// Skip consumes n raw bytes (n is used as given: round it up first if the
// item is padded).
func (d *Decoder) Skip(n int) error {
	if n < 0 || len(d.buf)-d.off < n {
		return d.short("skip", n)
	}
	d.off += n
	return nil
}
