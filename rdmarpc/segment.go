package rdmarpc

import "github.com/rdmagw/rdmagw/xdr"

// Segment is an RDMA segment (struct rpcrdma1_segment): the coordinates
// of one contiguous region of registered memory on the requester.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Handle                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            Length                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                            Offset                             +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
type Segment struct {
	Handle uint32 // R_key / STag of the registration
	Length uint32 // bytes
	Offset uint64 // remote virtual address or offset within the region
}

// segmentSize is the XDR size of a Segment ("HLOO").
const segmentSize = 16

func decodeSegment(d *xdr.Decoder) (Segment, error) {
	// One length check for the whole segment: the three reads below
	// cannot fail once 16 bytes are known to be there.
	if d.Len() < segmentSize {
		return Segment{}, d.Skip(segmentSize)
	}
	h, _ := d.Uint32()
	l, _ := d.Uint32()
	o, _ := d.Uint64()
	return Segment{Handle: h, Length: l, Offset: o}, nil
}

// wraps reports whether the segment's last byte lies beyond 2^64-1.
func (s Segment) wraps() bool { return s.Length > 0 && s.Offset+uint64(s.Length)-1 < s.Offset }

func encodeSegment(e *xdr.Encoder, s Segment) {
	e.PutUint32(s.Handle)
	e.PutUint32(s.Length)
	e.PutUint64(s.Offset)
}
