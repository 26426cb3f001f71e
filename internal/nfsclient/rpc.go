package nfsclient

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// authSysBody is the AUTH_SYS credential every call carries: uid 0, gid 0.
var authSysBody = (&nfsproto.AuthSys{
	Stamp:       uint32(time.Now().Unix()),
	MachineName: "rdmagw",
}).Encode()

// maxCallHeader bounds an encoded call header with our credential.
const maxCallHeader = 6*4 + 8 + 64 + 8

// xidSource hands out XIDs. It starts from the clock so that a restarted
// client does not reuse the XIDs a server's duplicate request cache still
// holds for the previous run.
type xidSource struct{ next atomic.Uint32 }

func newXIDSource() *xidSource {
	s := &xidSource{}
	s.next.Store(uint32(time.Now().UnixNano()))
	return s
}

func (s *xidSource) get() uint32 { return s.next.Add(1) }

// encodeCallHeader writes the RPC call header of xid/prog/vers/proc into
// b and returns the bytes written.
func encodeCallHeader(b []byte, xid, prog, vers, proc uint32) ([]byte, error) {
	h := oncrpc.CallHeader{
		XID: xid, RPCVers: oncrpc.RPCVersion, Prog: prog, Vers: vers, Proc: proc,
		Cred: oncrpc.OpaqueAuth{Flavor: oncrpc.AuthSys, Body: authSysBody},
		Verf: oncrpc.NullAuth,
	}
	e := xdr.NewEncoder(b)
	if err := h.Encode(&e); err != nil {
		return nil, err
	}
	return e.Bytes(), nil
}

// parseReply checks the reply header of a whole reply and returns the
// results that follow an accepted SUCCESS.
func parseReply(reply []byte, prog, vers, proc uint32) ([]byte, error) {
	var h oncrpc.ReplyHeader
	n, err := h.Decode(reply)
	if err != nil {
		return nil, fmt.Errorf("nfsclient: bad reply header: %w", err)
	}
	if h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.Success {
		return nil, &RPCError{Prog: prog, Vers: vers, Proc: proc, Reply: h}
	}
	return reply[n:], nil
}
