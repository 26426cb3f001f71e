package oncrpc

import (
	"github.com/rdmagw/rdmagw/xdr"
)

// MsgType is msg_type (RFC 5531 §9).
type MsgType uint32

const (
	Call  MsgType = 0
	Reply MsgType = 1
)

// RPCVersion is the only rpcvers RFC 5531 defines.
const RPCVersion = 2

// CallHeader is the fixed part of an RPC call, everything before the
// procedure's arguments:
//
//	 0                   1                   2                   3
//	+---------------+---------------+---------------+---------------+
//	|                              xid                              |
//	+---------------------------------------------------------------+
//	|                        msg_type = CALL (0)                    |
//	+---------------------------------------------------------------+
//	|                          rpcvers = 2                          |
//	+---------------------------------------------------------------+
//	|                             prog                              |
//	+---------------------------------------------------------------+
//	|                             vers                              |
//	+---------------------------------------------------------------+
//	|                             proc                              |
//	+---------------------------------------------------------------+
//	|                 cred: flavor, length, body<400>               |
//	+---------------------------------------------------------------+
//	|                 verf: flavor, length, body<400>               |
//	+---------------------------------------------------------------+
//	|                     procedure arguments ...                   |
//
// Cred.Body and Verf.Body are sub-slices of the decoded buffer.
type CallHeader struct {
	XID     uint32
	RPCVers uint32
	Prog    uint32
	Vers    uint32
	Proc    uint32
	Cred    OpaqueAuth
	Verf    OpaqueAuth
}

// Decode parses a call header at the start of b and returns its length,
// the offset of the arguments. b may hold the whole message or just a
// prefix of it (a Peek).
//
// On error, the fields read so far are set. In particular XID is set
// whenever b holds at least 4 bytes, and RPCVers is set with
// ErrBadRPCVersion, so the caller can answer with RPCMismatchReply.
func (h *CallHeader) Decode(b []byte) (int, error) {
	d := xdr.NewDecoder(b)
	return h.decode(&d)
}

func (h *CallHeader) decode(d *xdr.Decoder) (int, error) {
	start := d.Offset()
	*h = CallHeader{}
	var err error
	if h.XID, err = decodeXIDType(d, Call); err != nil {
		return 0, err
	}
	at := d.Offset()
	if h.RPCVers, err = d.Uint32(); err != nil {
		return 0, &HeaderError{Field: "rpcvers", Offset: at, Err: err}
	}
	if h.RPCVers != RPCVersion {
		return 0, &HeaderError{Field: "rpcvers", Offset: at, Value: h.RPCVers, Err: ErrBadRPCVersion}
	}
	at = d.Offset()
	if h.Prog, err = d.Uint32(); err != nil {
		return 0, &HeaderError{Field: "prog", Offset: at, Err: err}
	}
	at = d.Offset()
	if h.Vers, err = d.Uint32(); err != nil {
		return 0, &HeaderError{Field: "vers", Offset: at, Err: err}
	}
	at = d.Offset()
	if h.Proc, err = d.Uint32(); err != nil {
		return 0, &HeaderError{Field: "proc", Offset: at, Err: err}
	}
	if err = decodeAuth(d, &h.Cred, "cred"); err != nil {
		return 0, err
	}
	if err = decodeAuth(d, &h.Verf, "verf"); err != nil {
		return 0, err
	}
	return d.Offset() - start, nil
}

// EncodedLen is the number of bytes Encode writes.
func (h *CallHeader) EncodedLen() int {
	return 6*4 + h.Cred.encodedLen() + h.Verf.encodedLen()
}

// Encode appends the call header to e; the arguments follow. RPCVers is
// written as given (set it to RPCVersion). It returns ErrAuthTooLong for an
// oversized credential or verifier (writing nothing), otherwise e.Err().
func (h *CallHeader) Encode(e *xdr.Encoder) error {
	if len(h.Cred.Body) > MaxAuthBytes {
		return encodeAuth(e, &h.Cred, "cred")
	}
	if len(h.Verf.Body) > MaxAuthBytes {
		return encodeAuth(e, &h.Verf, "verf")
	}
	e.PutUint32(h.XID)
	e.PutUint32(uint32(Call))
	e.PutUint32(h.RPCVers)
	e.PutUint32(h.Prog)
	e.PutUint32(h.Vers)
	e.PutUint32(h.Proc)
	_ = encodeAuth(e, &h.Cred, "cred")
	_ = encodeAuth(e, &h.Verf, "verf")
	return e.Err()
}

// PeekMsgType returns the xid and msg_type of the message starting at b,
// for a reader that must tell calls from replies (the backchannel shares
// a connection with forward traffic).
func PeekMsgType(b []byte) (xid uint32, mt MsgType, err error) {
	d := xdr.NewDecoder(b)
	if xid, err = d.Uint32(); err != nil {
		return 0, 0, &HeaderError{Field: "xid", Offset: 0, Err: err}
	}
	v, err := d.Uint32()
	if err != nil {
		return xid, 0, &HeaderError{Field: "msg_type", Offset: 4, Err: err}
	}
	if v > uint32(Reply) {
		return xid, MsgType(v), &HeaderError{Field: "msg_type", Offset: 4, Value: v, Err: ErrBadMsgType}
	}
	return xid, MsgType(v), nil
}

// decodeXIDType reads the two words every RPC message starts with, xid
// and msg_type, and checks msg_type is want. The xid is returned even when
// msg_type is wrong, so the caller can still answer or count the message.
func decodeXIDType(d *xdr.Decoder, want MsgType) (uint32, error) {
	start := d.Offset()
	xid, err := d.Uint32()
	if err != nil {
		return 0, &HeaderError{Field: "xid", Offset: start, Err: err}
	}
	at := d.Offset()
	mt, err := d.Uint32()
	if err != nil {
		return xid, &HeaderError{Field: "msg_type", Offset: at, Err: err}
	}
	if MsgType(mt) != want {
		notErr := ErrNotCall
		if want == Reply {
			notErr = ErrNotReply
		}
		return xid, &HeaderError{Field: "msg_type", Offset: at, Value: mt, Err: notErr}
	}
	return xid, nil
}
