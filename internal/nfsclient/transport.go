package nfsclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/oncrpc"
)

// Transport carries RPC calls to one server. Implementations are safe for
// concurrent use: calls in flight at once are matched to replies by XID.
type Transport interface {
	// Call sends a call of prog/vers/proc with the encoded arguments args
	// and returns the procedure's results: the reply bytes after an
	// accepted SUCCESS reply header. Any other reply is an *RPCError. The
	// caller owns the returned slice. ctx bounds the wait for the reply.
	Call(ctx context.Context, prog, vers, proc uint32, args []byte) ([]byte, error)
	// Close ends the connection; calls in flight fail with ErrClosed.
	Close() error
}

// ErrClosed is returned for calls on (or in flight at) a closed transport.
var ErrClosed = errors.New("nfsclient: transport closed")

// RPCError is a reply other than an accepted SUCCESS: PROG_UNAVAIL,
// PROC_UNAVAIL, GARBAGE_ARGS, an auth error and so on.
type RPCError struct {
	Prog, Vers, Proc uint32
	Reply            oncrpc.ReplyHeader
}

func (e *RPCError) Error() string {
	h := &e.Reply
	if h.Stat == oncrpc.MsgDenied {
		if h.RejectStat == oncrpc.AuthError {
			return fmt.Sprintf("rpc %d/%d proc %d: denied: auth error %d", e.Prog, e.Vers, e.Proc, h.AuthStat)
		}
		return fmt.Sprintf("rpc %d/%d proc %d: denied: rpc version mismatch (%d-%d)", e.Prog, e.Vers, e.Proc, h.Low, h.High)
	}
	names := [...]string{"success", "PROG_UNAVAIL", "PROG_MISMATCH", "PROC_UNAVAIL", "GARBAGE_ARGS", "SYSTEM_ERR"}
	name := fmt.Sprintf("accept_stat %d", h.AcceptStat)
	if int(h.AcceptStat) < len(names) {
		name = names[h.AcceptStat]
	}
	return fmt.Sprintf("rpc %d/%d proc %d: %s", e.Prog, e.Vers, e.Proc, name)
}

// AcceptStat reports the accept_stat of an accepted reply carried by err,
// and whether err is such a reply.
func AcceptStat(err error) (oncrpc.AcceptStat, bool) {
	var re *RPCError
	if errors.As(err, &re) && re.Reply.Stat == oncrpc.MsgAccepted {
		return re.Reply.AcceptStat, true
	}
	return 0, false
}
