package nfsproto

import "github.com/rdmagw/rdmagw/xdr"

// Dec decodes XDR with a sticky error: it is xdr.Reader over a whole
// message, so after the first failure every method returns zero values
// and Err reports that failure (a message that ends early is ErrShort).
// Opaque(limit) and the other length checks follow xdr.Reader's rules.
type Dec struct{ xdr.Reader }

// NewDec returns a Dec over b.
func NewDec(b []byte) *Dec { return &Dec{xdr.NewReader(b)} }

// Time reads an nfstime3 (seconds, nanoseconds).
func (d *Dec) Time() Time { return Time{Sec: d.Uint32(), Nsec: d.Uint32()} }
