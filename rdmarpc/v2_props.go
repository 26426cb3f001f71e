package rdmarpc

import (
	"bytes"
	"encoding/binary"

	"github.com/rdmagw/rdmagw/xdr"
)

// PropID is rpcrdma2_propid, the code point of a transport property.
type PropID uint32

// Transport properties of the base protocol (the XDR's RDMA2_PROPID_*).
const (
	PropMaxSendSize     PropID = 1 // RDMA2_PROPID_SBSIZ: largest Send payload, octets
	PropRecvBufSize     PropID = 2 // RDMA2_PROPID_RBSIZ: smallest pre-posted receive buffer
	PropMaxSegmentSize  PropID = 3 // RDMA2_PROPID_RSSIZ: largest segment
	PropMaxSegmentCount PropID = 4 // RDMA2_PROPID_RCSIZ: most segments in a Requester's header
	PropReverseDir      PropID = 5 // RDMA2_PROPID_BRS: reverse-direction support, RvrsDir*
	PropHostAuth        PropID = 6 // RDMA2_PROPID_HOSTAUTH: host authentication material
)

// Reverse-direction support levels, the values of PropReverseDir.
const (
	RvrsDirNone   uint32 = 0 // RDMA2_RVRSDIR_NONE
	RvrsDirSimple uint32 = 1 // RDMA2_RVRSDIR_SIMPLE: Simple Format without data item chunks
	RvrsDirCont   uint32 = 2 // RDMA2_RVRSDIR_CONT: Simple or Continued, no data item chunks
	RvrsDirGenl   uint32 = 3 // RDMA2_RVRSDIR_GENL: as in the forward direction
)

// Defaults of the properties (the draft's table), what a peer that did not
// send a property, or sent it with zero-length rdma_data, means.
const (
	DefaultPropMaxSendSize     = 4096
	DefaultPropRecvBufSize     = 4096
	DefaultPropMaxSegmentSize  = 1048576
	DefaultPropMaxSegmentCount = 16
	DefaultPropReverseDir      = RvrsDirNone
)

// PropVal is struct rpcrdma2_propval: a property's code point and its
// value, the XDR encoding of the property's type.
type PropVal struct {
	Which PropID
	Data  []byte
}

// TransportProps are the known properties of a property set, defaults
// filled in. HostAuth is the material itself (the value of the opaque<>
// that rdma_data encodes), pointing into the message.
type TransportProps struct {
	MaxSendSize     uint32
	RecvBufSize     uint32
	MaxSegmentSize  uint32
	MaxSegmentCount uint32
	ReverseDir      uint32
	HostAuth        []byte
	// Present has bit 1<<id set for each known property the set carried
	// (with data or empty).
	Present uint32
}

// DefaultTransportProps are the properties of a peer that sent none.
func DefaultTransportProps() TransportProps {
	return TransportProps{
		MaxSendSize: DefaultPropMaxSendSize, RecvBufSize: DefaultPropRecvBufSize,
		MaxSegmentSize: DefaultPropMaxSegmentSize, MaxSegmentCount: DefaultPropMaxSegmentCount,
		ReverseDir: DefaultPropReverseDir,
	}
}

// Has reports whether the set carried property id.
func (p *TransportProps) Has(id PropID) bool { return id < 32 && p.Present&(1<<id) != 0 }

// Apply folds the known properties of props, in order, into p: a later
// occurrence of a property replaces an earlier one, zero-length data
// restores the default, unknown properties are skipped. props must have
// passed Decode (or checkPropVal); a malformed known value is skipped.
func (p *TransportProps) Apply(props []PropVal) {
	def := DefaultTransportProps()
	for _, v := range props {
		if v.Which >= 32 || checkPropVal(v) != nil {
			continue
		}
		u := uint32(0)
		if len(v.Data) == 4 {
			u = binary.BigEndian.Uint32(v.Data)
		}
		empty := len(v.Data) == 0
		switch v.Which {
		case PropMaxSendSize:
			p.MaxSendSize = pick(empty, def.MaxSendSize, u)
		case PropRecvBufSize:
			p.RecvBufSize = pick(empty, def.RecvBufSize, u)
		case PropMaxSegmentSize:
			p.MaxSegmentSize = pick(empty, def.MaxSegmentSize, u)
		case PropMaxSegmentCount:
			p.MaxSegmentCount = pick(empty, def.MaxSegmentCount, u)
		case PropReverseDir:
			p.ReverseDir = pick(empty, def.ReverseDir, u)
		case PropHostAuth:
			p.HostAuth = nil
			if !empty {
				d := xdr.NewDecoder(v.Data)
				p.HostAuth, _ = d.Opaque(-1)
			}
		default:
			continue
		}
		p.Present |= 1 << v.Which
	}
}

func pick(empty bool, def, v uint32) uint32 {
	if empty {
		return def
	}
	return v
}

// Properties returns the known properties of a CONNPROP header, defaults
// filled in.
func (h *V2Header) Properties() TransportProps {
	p := DefaultTransportProps()
	p.Apply(h.Props)
	return p
}

// AppendProp adds a property with value data (the XDR encoding of its
// type; not copied, so data must outlive the header's encoding).
func (h *V2Header) AppendProp(which PropID, data []byte) {
	h.Props = append(h.Props, PropVal{Which: which, Data: data})
}

// AppendPropUint32 adds a property whose type is uint32, its value held in
// the header's own storage.
func (h *V2Header) AppendPropUint32(which PropID, v uint32) {
	data := h.propData(4)
	binary.BigEndian.PutUint32(data, v)
	h.AppendProp(which, data)
}

// AppendTransportProps adds the five uint32 properties of p (HostAuth,
// when not nil, is added with its material encoded as opaque<> into
// header storage or, if larger, the heap).
func (h *V2Header) AppendTransportProps(p TransportProps) {
	h.AppendPropUint32(PropMaxSendSize, p.MaxSendSize)
	h.AppendPropUint32(PropRecvBufSize, p.RecvBufSize)
	h.AppendPropUint32(PropMaxSegmentSize, p.MaxSegmentSize)
	h.AppendPropUint32(PropMaxSegmentCount, p.MaxSegmentCount)
	h.AppendPropUint32(PropReverseDir, p.ReverseDir)
	if p.HostAuth != nil {
		data := h.propData(4 + xdr.RoundUp(len(p.HostAuth)))
		e := xdr.NewEncoder(data)
		e.PutOpaque(p.HostAuth)
		h.AppendProp(PropHostAuth, data)
	}
}

// propData returns n bytes of the header's property storage, or of the
// heap when it is used up.
func (h *V2Header) propData(n int) []byte { return carve(h.propBytes[:], &h.npb, n) }

// checkPropVal checks a known property's value against its XDR type: it
// must be empty (the default) or exactly the encoding of the type (a
// uint32, or for HOSTAUTH an opaque<> filling rdma_data). Unknown
// properties are not checked. The error's Value is the offending length.
func checkPropVal(v PropVal) error {
	n := len(v.Data)
	switch v.Which {
	case PropMaxSendSize, PropRecvBufSize, PropMaxSegmentSize, PropMaxSegmentCount, PropReverseDir:
		if n == 0 || n == 4 {
			return nil
		}
	case PropHostAuth:
		if n == 0 {
			return nil
		}
		d := xdr.NewDecoder(v.Data)
		if _, err := d.Opaque(-1); err == nil && d.Len() == 0 {
			return nil
		}
	default:
		return nil
	}
	return ErrBadPropVal
}

// decodeProps reads rpcrdma2_hdr_connprop: a counted array of propvals.
func (h *V2Header) decodeProps(d *xdr.Decoder) error {
	n, err := d.ArrayLen(-1, 8) // a propval is at least rdma_which and a zero length
	if err != nil {
		return h.truncated(InProps, err)
	}
	for i := range n {
		off := d.Offset()
		which, err := d.Uint32()
		if err != nil {
			return h.fail(V2ErrBadXDR, ReasonTruncated, InProps, off, i, 0, 0, err)
		}
		data, err := d.Opaque(-1)
		if err != nil {
			// The draft's example of RDMA2_ERR_BAD_PROPVAL: an
			// rdma_data longer than the message.
			return h.fail(V2ErrBadPropVal, ReasonTruncated, InProps, off, i, uint64(which), 0, err)
		}
		v := PropVal{Which: PropID(which), Data: data}
		if checkPropVal(v) != nil {
			return h.fail(V2ErrBadPropVal, ReasonBadPropVal, InProps, off, i, uint64(which), 0, nil)
		}
		h.Props = append(h.Props, v)
	}
	return nil
}

func encodeProps(e *xdr.Encoder, props []PropVal) {
	e.PutUint32(uint32(len(props)))
	for _, p := range props {
		e.PutUint32(uint32(p.Which))
		e.PutOpaque(p.Data)
	}
}

func propsLen(props []PropVal) int {
	n := 4
	for _, p := range props {
		n += 8 + xdr.RoundUp(len(p.Data))
	}
	return n
}

func propsEqual(a, b []PropVal) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Which != b[i].Which || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}
