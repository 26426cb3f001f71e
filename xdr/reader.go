package xdr

// Reader reads XDR items from the start of a slice with a sticky stop:
// the first shortfall or malformation stops it, every later read does
// nothing and returns zero values, and one check at the end (OK, Need,
// Err) says how it went. A layout reads as straight-line code.
//
// The slice may be a whole message or only the part of one that has
// arrived from a socket so far. Running out of bytes is therefore not an
// error at the time: the Reader records in Need how long the slice must be
// to get past the read that ran short, without allocating, and a caller
// streaming a message comes back with more bytes; a caller holding the
// whole message treats it as malformed (Err reports it as ErrShort).
//
// # Length limits (Opaque, Length, ArrayLen)
//
// A variable-length opaque, string, item length or array count is checked
// against the caller's limit as soon as its 4-byte length word is in the
// slice, before any byte of the body need be:
//
//   - no length word in the slice: shortfall, Need = offset + 4;
//   - length > limit (limit >= 0): malformed, an *Error with ErrTooLong
//     at the length word's offset (Want = the length, Have = limit),
//     whether or not the body has arrived; the Reader stays at the length
//     word;
//   - length <= limit, or limit < 0 (no limit of the caller's own): Opaque
//     wants the body and its padding in the slice, else a shortfall with
//     Need = offset + 4 + RoundUp(length); ArrayLen wants count * minElem
//     bytes after the count; Length wants nothing more (the item's body
//     may be placed elsewhere);
//   - pad bytes are skipped, not checked (as Decoder.Opaque does).
//
// The limit is on the unpadded length, the number XDR's <max> means.
//
// Only Err allocates (an error for a shortfall, built when asked for);
// malformations found on the way allocate their *Error once, when they
// stop the Reader.
type Reader struct {
	d      Decoder
	need   int    // > 0: the slice must be at least this long to go on
	needOp string // the item that ran short
	err    error  // malformed input
	short  error  // the shortfall as an error, once Err has built it
}

// NewReader returns a Reader over b from offset 0.
func NewReader(b []byte) Reader { return Reader{d: NewDecoder(b)} }

// Reset makes r read b from offset 0 and clears its stop.
func (r *Reader) Reset(b []byte) { *r = Reader{}; r.d.Reset(b) }

// OK reports whether nothing has stopped the Reader yet.
func (r *Reader) OK() bool { return r.need == 0 && r.err == nil }

// Need is how long the slice must be for the read that ran short to go on
// (counted from the slice's start), or 0 if none ran short.
func (r *Reader) Need() int { return r.need }

// Err is why the Reader stopped: the malformation, or, for a shortfall, an
// *Error with ErrShort naming the item that ran short (built on the first
// call; later calls return the same error). It is nil while OK.
func (r *Reader) Err() error {
	if r.err != nil {
		return r.err
	}
	if r.need > 0 && r.short == nil {
		r.short = &Error{Op: r.needOp, Offset: r.d.Offset(), Want: r.need - r.d.Offset(), Have: r.d.Len(), Err: ErrShort}
	}
	return r.short
}

// Fail stops the Reader with err unless it has stopped already (the first
// stop wins): for checks of meaning, such as a union discriminant that
// selects no arm.
func (r *Reader) Fail(err error) {
	if r.OK() {
		r.err = err
	}
}

// Offset is the number of bytes consumed so far.
func (r *Reader) Offset() int { return r.d.Offset() }

// Len is the number of bytes left in the slice.
func (r *Reader) Len() int { return r.d.Len() }

// Has reports whether the Reader is OK and n more bytes are in the slice,
// recording the shortfall if they are not.
func (r *Reader) Has(n int) bool { return r.has("bytes", n) }

func (r *Reader) has(op string, n int) bool {
	if !r.OK() {
		return false
	}
	if r.d.Len() >= n {
		return true
	}
	r.need, r.needOp = r.d.Offset()+n, op
	return false
}

// Peek returns the next word without consuming it, or 0 if the Reader has
// stopped or the word is not in the slice (neither is recorded).
func (r *Reader) Peek() uint32 {
	if !r.OK() {
		return 0
	}
	q := r.d // a Decoder is two words: copying it is the cheap peek
	v, _ := q.Uint32()
	return v
}

// Uint32 reads an unsigned int.
func (r *Reader) Uint32() uint32 {
	if !r.has("uint32", 4) {
		return 0
	}
	v, _ := r.d.Uint32()
	return v
}

// Uint64 reads an unsigned hyper.
func (r *Reader) Uint64() uint64 {
	if !r.has("uint64", 8) {
		return 0
	}
	v, _ := r.d.Uint64()
	return v
}

// Bool reads a bool (also the discriminant of optional data): a value
// other than 0 or 1 is malformed (ErrBadBool).
func (r *Reader) Bool() bool {
	if !r.has("bool", 4) {
		return false
	}
	v, err := r.d.Bool()
	if err != nil {
		r.err = err
	}
	return v
}

// Skip passes over n bytes of fixed-size items (n is used as given:
// round it up first if the item is padded). A negative n is malformed.
func (r *Reader) Skip(n int) { r.fixed("skip", n) }

// FixedOpaque reads n bytes of fixed-length opaque data and their padding,
// returning the n bytes as a sub-slice. A negative n is malformed.
func (r *Reader) FixedOpaque(n int) []byte {
	b := r.fixed("fixed opaque", RoundUp(n))
	if b == nil || n < 0 {
		return nil
	}
	return b[:n:n]
}

func (r *Reader) fixed(op string, n int) []byte {
	if n < 0 {
		r.Fail(&Error{Op: op, Offset: r.d.Offset(), Want: n, Have: r.d.Len(), Err: ErrShort})
		return nil
	}
	if !r.has(op, n) {
		return nil
	}
	b := r.d.buf[r.d.off : r.d.off+n : r.d.off+n]
	r.d.off += n
	return b
}

// Opaque reads a variable-length opaque or string of at most limit bytes
// (limit < 0: no limit of the caller's own) and returns its body as a
// sub-slice. See the type's comment for how the limit is applied.
func (r *Reader) Opaque(limit int) []byte {
	n, ok := r.length("opaque", limit)
	if !ok || !r.has("opaque", 4+RoundUp(n)) {
		return nil
	}
	b, _ := r.d.Opaque(-1)
	return b
}

// Length reads the length word of a variable-length item whose body need
// not be in the slice (it may be placed elsewhere) and checks it against
// limit (limit < 0: no limit). The body is not consumed.
func (r *Reader) Length(limit int) int {
	n, ok := r.length("length", limit)
	if !ok {
		return 0
	}
	_, _ = r.d.Uint32()
	return n
}

// length checks the length word at the current offset against limit
// without consuming it.
func (r *Reader) length(op string, limit int) (int, bool) {
	if !r.has(op, 4) {
		return 0, false
	}
	n := r.Peek()
	if limit >= 0 && uint64(n) > uint64(limit) {
		r.err = &Error{Op: op, Offset: r.d.Offset(), Want: int(n), Have: limit, Err: ErrTooLong}
		return 0, false
	}
	return int(n), true
}

// ArrayLen reads the count of a counted array of at most limit elements
// (limit < 0: no limit) of at least minElem bytes each, once the slice
// holds count * minElem bytes after the count.
func (r *Reader) ArrayLen(limit, minElem int) int {
	n, ok := r.length("array count", limit)
	if !ok || !r.has("array", 4+n*max(minElem, 0)) {
		return 0
	}
	_, _ = r.d.Uint32()
	return n
}
