package xdr

import (
	"errors"
	"fmt"
)

// Sentinel causes carried by *Error. Test with errors.Is.
var (
	// ErrShort: the input ended before the item did.
	ErrShort = errors.New("short buffer")
	// ErrTooLong: a length or count exceeded the caller's maximum.
	ErrTooLong = errors.New("length exceeds limit")
	// ErrBadBool: a boolean or optional-data discriminant was neither 0 nor 1.
	ErrBadBool = errors.New("boolean not 0 or 1")
	// ErrOverflow: an Encoder ran past the end of its buffer.
	ErrOverflow = errors.New("encode buffer overflow")
)

// Error says what went wrong, where, and while doing what.
type Error struct {
	Op     string // the item being read or written, e.g. "uint32", "opaque"
	Offset int    // byte offset of the item in the buffer
	Want   int    // bytes (or count) needed or claimed
	Have   int    // bytes left (or the limit)
	Err    error  // one of the sentinel errors above
}

func (e *Error) Error() string {
	switch e.Err {
	case ErrShort, ErrOverflow:
		return fmt.Sprintf("xdr: %s at offset %d: %v (need %d bytes, have %d)", e.Op, e.Offset, e.Err, e.Want, e.Have)
	case ErrTooLong:
		return fmt.Sprintf("xdr: %s at offset %d: %v (%d > %d)", e.Op, e.Offset, e.Err, e.Want, e.Have)
	}
	return fmt.Sprintf("xdr: %s at offset %d: %v (value %d)", e.Op, e.Offset, e.Err, e.Want)
}

func (e *Error) Unwrap() error { return e.Err }

// Pad returns the number of zero bytes XDR appends to an item of n bytes.
func Pad(n int) int { return -n & 3 }

// RoundUp returns n rounded up to the next multiple of 4.
func RoundUp(n int) int { return (n + 3) &^ 3 }
