package oncrpc

import (
	"github.com/rdmagw/rdmagw/xdr"
)

// ReplyStat is reply_stat (RFC 5531 §9).
type ReplyStat uint32

const (
	MsgAccepted ReplyStat = 0
	MsgDenied   ReplyStat = 1
)

// AcceptStat is accept_stat: how an accepted call fared.
type AcceptStat uint32

const (
	Success      AcceptStat = 0 // results follow
	ProgUnavail  AcceptStat = 1 // program not exported
	ProgMismatch AcceptStat = 2 // version not supported: low, high follow
	ProcUnavail  AcceptStat = 3 // procedure not supported
	GarbageArgs  AcceptStat = 4 // arguments could not be decoded
	SystemErr    AcceptStat = 5 // e.g. memory allocation failure
)

// RejectStat is reject_stat: why a call was denied.
type RejectStat uint32

const (
	RPCMismatch RejectStat = 0 // rpcvers not 2: low, high follow
	AuthError   RejectStat = 1 // auth_stat follows
)

// AuthStat is auth_stat: why authentication failed.
type AuthStat uint32

const (
	AuthOK               AuthStat = 0
	AuthBadCred          AuthStat = 1  // bad credential (seal broken)
	AuthRejectedCred     AuthStat = 2  // client must begin new session
	AuthBadVerf          AuthStat = 3  // bad verifier (seal broken)
	AuthRejectedVerf     AuthStat = 4  // verifier expired or replayed
	AuthTooWeak          AuthStat = 5  // rejected for security reasons
	AuthInvalidResp      AuthStat = 6  // bogus response verifier
	AuthFailed           AuthStat = 7  // reason unknown
	AuthKerbGeneric      AuthStat = 8  // kerberos generic error
	AuthTimeExpire       AuthStat = 9  // time of credential expired
	AuthTktFile          AuthStat = 10 // problem with ticket file
	AuthDecode           AuthStat = 11 // can't decode authenticator
	AuthNetAddr          AuthStat = 12 // wrong net address in ticket
	RPCSecGSSCredProblem AuthStat = 13 // no credentials for user
	RPCSecGSSCtxProblem  AuthStat = 14 // problem with context
)

// ReplyHeader is the fixed part of an RPC reply, everything before the
// procedure's results:
//
//	+-----+---------+-------------+--------------------+---------------+
//	| xid | REPLY=1 | MSG_ACCEPTED| verf (flavor,body) | accept_stat   | SUCCESS: results follow
//	+-----+---------+-------------+--------------------+---------------+
//	                                                    PROG_MISMATCH: + low, high
//	                                                    other: nothing
//	+-----+---------+-------------+--------------+
//	| xid | REPLY=1 | MSG_DENIED  | reject_stat  |  RPC_MISMATCH: + low, high
//	+-----+---------+-------------+--------------+  AUTH_ERROR:   + auth_stat
//
// Which fields matter depends on Stat: Verf and AcceptStat for
// MsgAccepted; RejectStat for MsgDenied; Low and High for ProgMismatch and
// RPCMismatch; AuthStat for AuthError. Verf.Body is a sub-slice of the
// decoded buffer.
type ReplyHeader struct {
	XID        uint32
	Stat       ReplyStat
	Verf       OpaqueAuth
	AcceptStat AcceptStat
	RejectStat RejectStat
	Low, High  uint32
	AuthStat   AuthStat
}

// Decode parses a reply header at the start of b and returns its length.
// For an accepted SUCCESS reply that is the offset of the results; for any
// other reply it is the end of the message's meaningful content. On error,
// the fields read so far are set (XID whenever b holds 4 bytes).
func (h *ReplyHeader) Decode(b []byte) (int, error) {
	d := xdr.NewDecoder(b)
	return h.decode(&d)
}

func (h *ReplyHeader) decode(d *xdr.Decoder) (int, error) {
	start := d.Offset()
	*h = ReplyHeader{}
	var err error
	if h.XID, err = decodeXIDType(d, Reply); err != nil {
		return 0, err
	}
	at := d.Offset()
	stat, err := d.Uint32()
	if err != nil {
		return 0, &HeaderError{Field: "reply_stat", Offset: at, Err: err}
	}
	h.Stat = ReplyStat(stat)
	switch h.Stat {
	case MsgAccepted:
		if err = decodeAuth(d, &h.Verf, "verf"); err != nil {
			return 0, err
		}
		at = d.Offset()
		v, err := d.Uint32()
		if err != nil {
			return 0, &HeaderError{Field: "accept_stat", Offset: at, Err: err}
		}
		h.AcceptStat = AcceptStat(v)
		switch h.AcceptStat {
		case Success, ProgUnavail, ProcUnavail, GarbageArgs, SystemErr:
		case ProgMismatch:
			if err = decodeMismatch(d, h, "prog_mismatch"); err != nil {
				return 0, err
			}
		default:
			return 0, &HeaderError{Field: "accept_stat", Offset: at, Value: v, Err: ErrBadAcceptStat}
		}
	case MsgDenied:
		at = d.Offset()
		v, err := d.Uint32()
		if err != nil {
			return 0, &HeaderError{Field: "reject_stat", Offset: at, Err: err}
		}
		h.RejectStat = RejectStat(v)
		switch h.RejectStat {
		case RPCMismatch:
			if err = decodeMismatch(d, h, "rpc_mismatch"); err != nil {
				return 0, err
			}
		case AuthError:
			at = d.Offset()
			as, err := d.Uint32()
			if err != nil {
				return 0, &HeaderError{Field: "auth_stat", Offset: at, Err: err}
			}
			h.AuthStat = AuthStat(as)
		default:
			return 0, &HeaderError{Field: "reject_stat", Offset: at, Value: v, Err: ErrBadRejectStat}
		}
	default:
		return 0, &HeaderError{Field: "reply_stat", Offset: at, Value: stat, Err: ErrBadReplyStat}
	}
	return d.Offset() - start, nil
}

func decodeMismatch(d *xdr.Decoder, h *ReplyHeader, field string) error {
	at := d.Offset()
	var err error
	if h.Low, err = d.Uint32(); err == nil {
		h.High, err = d.Uint32()
	}
	if err != nil {
		return &HeaderError{Field: field, Offset: at, Err: err}
	}
	return nil
}

// EncodedLen is the number of bytes Encode writes.
func (h *ReplyHeader) EncodedLen() int {
	n := 3 * 4
	if h.Stat == MsgAccepted {
		n += h.Verf.encodedLen() + 4
		if h.AcceptStat == ProgMismatch {
			n += 8
		}
		return n
	}
	n += 4
	if h.RejectStat == RPCMismatch {
		return n + 8
	}
	return n + 4
}

// Encode appends the reply header to e; for SUCCESS the results follow.
// It refuses, writing nothing, a verifier over MaxAuthBytes
// (ErrAuthTooLong) and stat values outside RFC 5531, which would make a
// reply the peer cannot parse; otherwise it returns e.Err().
func (h *ReplyHeader) Encode(e *xdr.Encoder) error {
	switch h.Stat {
	case MsgAccepted:
		if len(h.Verf.Body) > MaxAuthBytes {
			return encodeAuth(e, &h.Verf, "verf")
		}
		if h.AcceptStat > SystemErr {
			return &HeaderError{Field: "accept_stat", Offset: e.Len() + 12 + h.Verf.encodedLen(),
				Value: uint32(h.AcceptStat), Err: ErrBadAcceptStat}
		}
	case MsgDenied:
		if h.RejectStat > AuthError {
			return &HeaderError{Field: "reject_stat", Offset: e.Len() + 12,
				Value: uint32(h.RejectStat), Err: ErrBadRejectStat}
		}
	default:
		return &HeaderError{Field: "reply_stat", Offset: e.Len() + 8, Value: uint32(h.Stat), Err: ErrBadReplyStat}
	}
	e.PutUint32(h.XID)
	e.PutUint32(uint32(Reply))
	e.PutUint32(uint32(h.Stat))
	if h.Stat == MsgAccepted {
		_ = encodeAuth(e, &h.Verf, "verf")
		e.PutUint32(uint32(h.AcceptStat))
		if h.AcceptStat == ProgMismatch {
			e.PutUint32(h.Low)
			e.PutUint32(h.High)
		}
		return e.Err()
	}
	e.PutUint32(uint32(h.RejectStat))
	if h.RejectStat == RPCMismatch {
		e.PutUint32(h.Low)
		e.PutUint32(h.High)
	} else {
		e.PutUint32(uint32(h.AuthStat))
	}
	return e.Err()
}
