package xdr

import "encoding/binary"

// Encoder writes XDR items into a fixed byte slice owned by the caller. It
// never grows the slice: a write past its end sets a sticky ErrOverflow
// error and every later write is a no-op, so a sequence of Put calls needs
// one check of Err at the end.
type Encoder struct {
	buf []byte
	off int
	err error
}

// NewEncoder returns an Encoder writing into b from offset 0.
func NewEncoder(b []byte) Encoder { return Encoder{buf: b} }

// Reset makes e write into b from offset 0 and clears its error.
func (e *Encoder) Reset(b []byte) { e.buf, e.off, e.err = b, 0, nil }

// Err returns the first overflow, if any.
func (e *Encoder) Err() error { return e.err }

// Len is the number of bytes written.
func (e *Encoder) Len() int { return e.off }

// Bytes returns the bytes written so far.
func (e *Encoder) Bytes() []byte { return e.buf[:e.off] }

// Available is the room left.
func (e *Encoder) Available() int { return len(e.buf) - e.off }

func (e *Encoder) room(op string, n int) bool {
	if e.err != nil {
		return false
	}
	if n < 0 || len(e.buf)-e.off < n {
		e.err = &Error{Op: op, Offset: e.off, Want: n, Have: len(e.buf) - e.off, Err: ErrOverflow}
		return false
	}
	return true
}

// PutUint32 writes an unsigned int.
func (e *Encoder) PutUint32(v uint32) {
	if e.room("uint32", 4) {
		binary.BigEndian.PutUint32(e.buf[e.off:], v)
		e.off += 4
	}
}

// PutInt32 writes an int.
func (e *Encoder) PutInt32(v int32) { e.PutUint32(uint32(v)) }

// PutEnum writes an enum.
func (e *Encoder) PutEnum(v int32) { e.PutUint32(uint32(v)) }

// PutUint64 writes an unsigned hyper.
func (e *Encoder) PutUint64(v uint64) {
	if e.room("uint64", 8) {
		binary.BigEndian.PutUint64(e.buf[e.off:], v)
		e.off += 8
	}
}

// PutInt64 writes a hyper.
func (e *Encoder) PutInt64(v int64) { e.PutUint64(uint64(v)) }

// PutBool writes a bool.
func (e *Encoder) PutBool(v bool) {
	if v {
		e.PutUint32(1)
	} else {
		e.PutUint32(0)
	}
}

// PutOptional writes the discriminant of optional-data.
func (e *Encoder) PutOptional(present bool) { e.PutBool(present) }

// PutFixedOpaque writes b and its zero padding.
func (e *Encoder) PutFixedOpaque(b []byte) {
	total := RoundUp(len(b))
	if !e.room("fixed opaque", total) {
		return
	}
	n := copy(e.buf[e.off:], b)
	clear(e.buf[e.off+n : e.off+total])
	e.off += total
}

// PutOpaque writes variable-length opaque data: length, bytes, padding.
func (e *Encoder) PutOpaque(b []byte) {
	if e.room("opaque", 4+RoundUp(len(b))) {
		e.PutUint32(uint32(len(b)))
		e.PutFixedOpaque(b)
	}
}

// PutString writes an XDR string.
func (e *Encoder) PutString(s string) {
	if !e.room("string", 4+RoundUp(len(s))) {
		return
	}
	e.PutUint32(uint32(len(s)))
	n := copy(e.buf[e.off:], s)
	total := RoundUp(len(s))
	clear(e.buf[e.off+n : e.off+total])
	e.off += total
}

// PutPad writes the zero padding that follows an item of n bytes whose
// body was placed elsewhere (for example sent from its own buffer in a
// vectored write).
func (e *Encoder) PutPad(n int) {
	p := Pad(n)
	if e.room("pad", p) {
		clear(e.buf[e.off : e.off+p])
		e.off += p
	}
}

// Reserve returns the next n bytes for the caller to fill in later (a
// length written after its body is known) and advances past them.
func (e *Encoder) Reserve(n int) []byte {
	if !e.room("reserve", n) {
		return nil
	}
	b := e.buf[e.off : e.off+n : e.off+n]
	e.off += n
	return b
}
