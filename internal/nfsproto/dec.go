package nfsproto

import "github.com/rdmagw/rdmagw/xdr"

// Dec decodes XDR with a sticky error: it is xdr.Reader over a whole
// message, so after the first failure every method returns zero values
// and Err reports that failure (a message that ends early is ErrShort).
// Opaque(limit) and the other length checks follow xdr.Reader's rules.
type Dec struct{ xdr.Reader }

// NewDec returns a Dec over b.
func NewDec(b []byte) *Dec { return &Dec{xdr.NewReader(b)} }

// U32 reads an unsigned int (xdr.Reader.Uint32, under the short name the
// NFS types here use).
func (d *Dec) U32() uint32 { return d.Uint32() }

// U64 reads an unsigned hyper.
func (d *Dec) U64() uint64 { return d.Uint64() }

// Fixed reads n bytes plus their XDR pad as a sub-slice
// (xdr.Reader.FixedOpaque).
func (d *Dec) Fixed(n int) []byte { return d.FixedOpaque(n) }

// Time reads an nfstime3 (seconds, nanoseconds).
func (d *Dec) Time() Time { return Time{Sec: d.U32(), Nsec: d.U32()} }
