package reverse

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/callback"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// The NFSv4.1+ backchannel through the reverse gateway (RFC 8167, RFC
// 8267 §6.5.2): forward mode's relay (gateway/forward/backchannel.go) the other way
// round.
//
// A TCP client that asks for the back channel on its session
// (CREATE_SESSION with CREATE_SESSION4_FLAG_CONN_BACK_CHAN, or
// BIND_CONN_TO_SESSION) does so through the gateway, so the server binds
// the client's RPC-over-RDMA connection, and sends its callbacks there as
// backward-direction calls (RDMA_MSG, no chunks). Each client's
// requester connection therefore serves backward calls
// (rdmarpc.RequesterBackchannel):
//
//   - it posts backchannel.max_calls receives beyond the forward credits
//     for them, and grants that many in every backward reply; a call
//     beyond them is dropped by the engine (reason no_credit);
//   - each call is written on the client's TCP connection as an RPC CALL
//     record, between the replies to the client's own calls;
//   - the client's reply is a record with msg_type REPLY on the same
//     connection: the reader matches it by XID to the waiting callback,
//     and the engine sends it to the server as a backward-direction
//     reply;
//   - a callback the client cannot be given (its connection failed, the
//     backchannel disabled) is answered SYSTEM_ERR at once; one still
//     waiting when the client disconnects fails with the RDMA
//     connection, which closes with the session; one the
//     client does not answer within backchannel.timeout gets no reply
//     (its credit is taken back, reason timeout; the server's own
//     callback timeout decides); a client reply larger than the server
//     can receive inline is replaced by SYSTEM_ERR (too_big), one for no
//     waiting callback is dropped (unmatched). Each is counted in
//     rdmagw_backchannel_errors_total{reason} and logged.
//
// backchannel.queue has no use here: the engine hands every call within
// the credit to the relay at once, nothing waits.
//
// After an RDMA reconnect the server sees a connection not bound to the
// session and reports SEQ4_STATUS_CB_PATH_DOWN_SESSION; the client binds
// it again with BIND_CONN_TO_SESSION through the gateway. Callbacks of the
// old connection whose replies come later are answered into the void.

// revBackchannel relays one TCP client's callbacks. It implements
// rdmarpc.BackwardHandler for every RDMA connection of the client's link.
type revBackchannel struct {
	cfg    gateway.BackchannelConfig
	met    *gateway.BackchannelMetrics
	client atomic.Pointer[revClient] // nil until the session runs and after it

	mu   sync.Mutex
	wait map[uint32]chan []byte // callbacks waiting for the client's reply, by XID
}

func newRevBackchannel(cfg *gateway.Config, met *gateway.BackchannelMetrics) *revBackchannel {
	return &revBackchannel{cfg: cfg.Backchannel.WithDefaults(), met: met, wait: make(map[uint32]chan []byte)}
}

// requesterConfig is the backward side of each RDMA connection.
func (b *revBackchannel) requesterConfig() rdmarpc.RequesterBackchannel {
	if b.cfg.Disabled {
		// One receive, enough to answer SYSTEM_ERR (reason disabled).
		return rdmarpc.RequesterBackchannel{Credits: 1, Handler: b, Metrics: b.met}
	}
	return rdmarpc.RequesterBackchannel{Credits: b.cfg.MaxCalls, Handler: b, Metrics: b.met}
}

// ServeBackward implements rdmarpc.BackwardHandler: it relays one
// callback to the client and returns the client's reply.
func (b *revBackchannel) ServeBackward(call []byte) []byte {
	xid := binary.BigEndian.Uint32(call)
	c := b.client.Load()
	switch {
	case b.cfg.Disabled:
		b.met.BackwardError("disabled")
		return callback.ErrorReply(xid)
	case c == nil:
		b.met.BackwardError("client_gone")
		return callback.ErrorReply(xid)
	}
	ch := make(chan []byte, 1)
	b.mu.Lock()
	if _, dup := b.wait[xid]; dup {
		// A retransmission while the first is with the client: the
		// client's one reply answers both.
		b.mu.Unlock()
		c.log.Debug("callback retransmission while the first is outstanding; not relayed again", "peer", c.peer, "xid", xid)
		return nil
	}
	b.wait[xid] = ch
	b.mu.Unlock()
	forget := func() {
		b.mu.Lock()
		delete(b.wait, xid)
		b.mu.Unlock()
	}
	if err := c.writeReply([][]byte{call}); err != nil {
		forget()
		b.met.BackwardError("client_gone")
		c.log.Warn("callback not forwarded to the client", "peer", c.peer, "xid", xid, "error", err)
		return callback.ErrorReply(xid)
	}
	c.log.Debug("callback forwarded to the client", "peer", c.peer, "xid", xid, "bytes", len(call))
	t := time.NewTimer(b.cfg.Timeout)
	defer t.Stop()
	select {
	case reply := <-ch:
		return reply
	case <-t.C:
		forget()
		b.met.BackwardError("timeout")
		c.log.Warn("client did not answer a callback in time", "peer", c.peer, "xid", xid, "timeout", b.cfg.Timeout)
		return nil
	case <-c.ctx.Done():
		// The session is ending and its RDMA connection closes with it,
		// which fails the server's outstanding callbacks at once.
		forget()
		b.met.BackwardError("client_gone")
		return nil
	}
}

// callbackReply takes a REPLY record from the client (reader goroutine,
// the record's first words peeked): the answer to a callback.
func (c *revClient) callbackReply(rr *tcprpc.RecordReader, xid uint32) error {
	b := c.link.bc
	limit := int(c.r.cfg.RDMA.InlineSend) - rdmarpc.BackwardHeaderSize
	msg, whole, err := callback.ReadRecord(rr, limit)
	if err != nil {
		return err
	}
	b.mu.Lock()
	ch, ok := b.wait[xid]
	delete(b.wait, xid)
	b.mu.Unlock()
	switch {
	case !ok:
		b.met.BackwardError("unmatched")
		c.log.Warn("RPC reply from the client for no outstanding callback dropped", "peer", c.peer, "xid", xid)
	case !whole:
		b.met.BackwardError("too_big")
		c.log.Warn("callback reply larger than the server's inline receive; answered SYSTEM_ERR", "peer", c.peer,
			"xid", xid, "bytes_at_least", len(msg), "limit", limit)
		ch <- callback.ErrorReply(xid)
	default:
		ch <- msg
	}
	return nil
}
