package nfsclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/verbs"
)

// RDMA is a Transport over one RPC-over-RDMA connection (RFC 8166),
// built on the rdmarpc requester. For each call it
//
//   - finds the call's DDP-eligible items (WRITE data, SYMLINK path) with
//     a ulb Walker and passes them as Item pieces, which the requester
//     exposes as Read chunks;
//   - offers what the requester policy (ulb.Requester.Plan, shared with
//     the reverse gateway) plans for the reply: a Write chunk per expected
//     READ/READLINK result and a Reply chunk when the reply may not fit
//     the inline receive size;
//   - splices the Write chunk data back into the reduced reply (whose
//     items keep their length words but lose their bodies), so the caller
//     sees the reply exactly as it would come over TCP (ulb.SpliceReply).
type RDMA struct {
	conn       *rdmarpc.RequesterConn
	xids       *xidSource
	inlineRecv int
}

// DialRDMA connects to an RPC-over-RDMA server (or rdmagw) at addr on dev.
func DialRDMA(ctx context.Context, dev verbs.Device, addr string, cfg rdmarpc.RequesterConfig) (*RDMA, error) {
	conn, err := rdmarpc.DialRequester(ctx, dev, addr, cfg)
	if err != nil {
		return nil, err
	}
	return NewRDMA(conn, cfg.InlineRecv), nil
}

// NewRDMA runs a transport over an established requester connection whose
// receive buffers are inlineRecv bytes (0: the default 4096).
func NewRDMA(conn *rdmarpc.RequesterConn, inlineRecv int) *RDMA {
	if inlineRecv <= 0 {
		inlineRecv = 4096
	}
	return &RDMA{conn: conn, xids: newXIDSource(), inlineRecv: inlineRecv}
}

// Conn is the underlying requester connection.
func (t *RDMA) Conn() *rdmarpc.RequesterConn { return t.conn }

// Close implements Transport.
func (t *RDMA) Close() error { return t.conn.Close() }

// Call implements Transport.
func (t *RDMA) Call(ctx context.Context, prog, vers, proc uint32, args []byte) ([]byte, error) {
	return t.call(ctx, prog, vers, proc, args, nil)
}

// call is Call with args in reg, a buffer of the requester's pool (or
// nil: anywhere), from which the requester sends them without a copy.
func (t *RDMA) call(ctx context.Context, prog, vers, proc uint32, args []byte, reg *rdmarpc.Buffer) ([]byte, error) {
	xid := t.xids.get()
	var hb [maxCallHeader]byte
	head, err := encodeCallHeader(hb[:], xid, prog, vers, proc)
	if err != nil {
		return nil, err
	}
	var msg rdmarpc.Message
	msg.Reset()
	msg.XID = xid
	if err := splitCall(&msg, head, args, reg, prog, vers, proc); err != nil {
		return nil, err
	}
	var rooms [ulb.MaxItems]int
	pol := t.policy()
	offer := pol.Plan(&ulb.CallInfo{Prog: prog, Vers: vers, Proc: proc, Args: args}, rooms[:0])
	plan := rdmarpc.ReplyPlan{WriteChunks: offer.WriteChunks, ReplyChunk: offer.ReplyChunk}

	var res rdmarpc.Result
	if err := t.conn.Call(ctx, &msg, &plan, &res); err != nil {
		if errors.Is(err, rdmarpc.ErrConnClosed) {
			return nil, fmt.Errorf("%w: %v", ErrClosed, err)
		}
		return nil, err
	}
	defer res.Release()
	reply, err := spliceReply(&res, &plan, prog, vers, proc)
	if err != nil {
		return nil, err
	}
	return parseReply(reply, prog, vers, proc)
}

// splitCall puts the call (RPC header head, then the arguments args) into
// msg, each DDP-eligible item's body as its own Item piece. The pieces
// point into head and args, not copied here; the requester copies what
// it sends inline into its Send buffer, and an Item's body into
// registered memory unless args lie in reg, a buffer of its pool (nil:
// they do not), which the pieces of args then name.
func splitCall(msg *rdmarpc.Message, head, args []byte, reg *rdmarpc.Buffer, prog, vers, proc uint32) error {
	msg.Append(rdmarpc.Piece{Data: head})
	var w ulb.Walker
	if err := w.Reset(ulb.Call, prog, vers, proc); err != nil {
		// No binding (not an NFS-family program): all inline.
		msg.Append(rdmarpc.Piece{Data: args, Buf: reg})
		return nil
	}
	start, off := 0, 0 // args[start:off] is inline not yet appended
	for {
		st, err := w.Next(args[off:])
		if err != nil {
			return fmt.Errorf("nfsclient: our own call does not walk: %w", err)
		}
		switch st.Kind {
		case ulb.StepDone:
			msg.Append(rdmarpc.Piece{Data: args[start:], Buf: reg})
			return nil
		case ulb.StepNeedMore:
			return fmt.Errorf("nfsclient: our own call is truncated (need %d bytes)", st.Need)
		}
		it := st.Item
		body := off + it.Offset
		msg.Append(rdmarpc.Piece{Data: args[start:body], Buf: reg})
		msg.Append(rdmarpc.Piece{Data: args[body : body+it.Length], Item: true, Buf: reg})
		off = body + it.Length + it.Pad
		start = off
	}
}

// policy is the requester policy for our calls (ulb.Requester): AUTH_SYS
// calls, so the estimates' empty reply verifier holds; every Write chunk
// the binding asks for (RFC 8267 §6.4.2's one-chunk default is for
// requesters that do not know their server; tests want them all).
func (t *RDMA) policy() ulb.Requester {
	return ulb.Requester{InlineRecv: t.inlineRecv, MaxChunk: t.conn.Pool().MaxSize(), HeaderMax: replyHeaderMax}
}

// replyHeaderMax is ulb.Requester.HeaderMax for rdmarpc's requester.
func replyHeaderMax(writeChunks []int) int {
	p := rdmarpc.ReplyPlan{WriteChunks: writeChunks}
	return p.ReplyHeaderMax()
}

// spliceReply rebuilds the reply as it would be on a byte stream: every
// item whose body went to a Write chunk gets that body (and its XDR pad)
// back after its length word (ulb.SpliceReply).
func spliceReply(res *rdmarpc.Result, plan *rdmarpc.ReplyPlan, prog, vers, proc uint32) ([]byte, error) {
	in := res.Inline
	var h oncrpc.ReplyHeader
	n, err := h.Decode(in)
	if err != nil {
		return nil, fmt.Errorf("nfsclient: bad reply header: %w", err)
	}
	success := h.Stat == oncrpc.MsgAccepted && h.AcceptStat == oncrpc.Success
	var w ulb.Walker
	var store [2*ulb.MaxItems + 2][]byte
	vec, _, err := ulb.SpliceReply(append(store[:0], in[:n]), &w, prog, vers, proc, success, in[n:], res.Chunks, plan.WriteChunks)
	if err != nil {
		return nil, fmt.Errorf("nfsclient: %w", err)
	}
	size := 0
	for _, v := range vec {
		size += len(v)
	}
	out := make([]byte, 0, size)
	for _, v := range vec {
		out = append(out, v...)
	}
	return out, nil
}
