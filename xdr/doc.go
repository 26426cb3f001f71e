// Package xdr implements the External Data Representation of RFC 4506 over
// caller-owned byte slices.
//
// Everything in rdmagw that parses or builds an ONC RPC message goes through
// this package, so it is written for the hot path:
//
//   - A Decoder reads from a slice it never copies: variable-length opaque
//     data and strings come back as sub-slices of the input.
//   - An Encoder writes into a fixed slice it never grows: a send buffer is
//     registered memory of a known size, so running past its end is an
//     error (ErrOverflow), not a reallocation.
//   - A Reader is a Decoder with a sticky stop, for layouts read as
//     straight-line code and for messages that arrive in pieces: a read
//     past the end records how many bytes are needed instead of failing,
//     and length limits are judged on the length word alone (reader.go).
//   - No method allocates on success. Every read is bounds-checked; on short
//     or hostile input a Decoder returns an *Error naming the operation and
//     the byte offset, and never panics.
//
// XDR units are 4 bytes, big-endian. Opaque data and strings are padded with
// zero bytes to a multiple of 4:
//
//	 0     1     2     3     4     5     6     7
//	+-----+-----+-----+-----+-----+-----+-----+-----+
//	|        length n       | byte0 | ... |n-1| pad |   variable opaque
//	+-----+-----+-----+-----+-----+-----+-----+-----+
//	                        |<------ n ----->|<-Pad(n)->
package xdr
