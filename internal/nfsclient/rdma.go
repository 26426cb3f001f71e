package nfsclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/verbs"
)

// RDMA is a Transport over one RPC-over-RDMA connection (RFC 8166),
// built on the rdmarpc requester. For each call it
//
//   - finds the call's DDP-eligible items (WRITE data, SYMLINK path) with
//     a ulb Walker and passes them as Item pieces, which the requester
//     exposes as Read chunks;
//   - asks ulb.EstimateReply what the reply needs and offers a Write chunk
//     per expected READ/READLINK result and a Reply chunk when the reply
//     may not fit the inline receive size;
//   - splices the Write chunk data back into the reduced reply (whose
//     items keep their length words but lose their bodies), so the caller
//     sees the reply exactly as it would come over TCP.
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
	xid := t.xids.get()
	call := make([]byte, maxCallHeader, maxCallHeader+len(args))
	head, err := encodeCallHeader(call, xid, prog, vers, proc)
	if err != nil {
		return nil, err
	}
	call = append(call[:len(head)], args...)

	var msg rdmarpc.Message
	msg.Reset()
	msg.XID = xid
	if err := splitCall(&msg, call, len(head), prog, vers, proc); err != nil {
		return nil, err
	}
	var plan rdmarpc.ReplyPlan
	var rooms [ulb.MaxItems]int
	t.planReply(&plan, rooms[:0], prog, vers, proc, args)

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

// splitCall puts call (RPC header of hdrLen bytes, then the arguments)
// into msg, each DDP-eligible item's body as its own Item piece.
func splitCall(msg *rdmarpc.Message, call []byte, hdrLen int, prog, vers, proc uint32) error {
	var w ulb.Walker
	if err := w.Reset(ulb.Call, prog, vers, proc); err != nil {
		// No binding (not an NFS-family program): all inline.
		msg.Append(rdmarpc.Piece{Data: call})
		return nil
	}
	start, off := 0, hdrLen // call[start:off] is inline not yet appended
	for {
		st, err := w.Next(call[off:])
		if err != nil {
			return fmt.Errorf("nfsclient: our own call does not walk: %w", err)
		}
		switch st.Kind {
		case ulb.StepDone:
			msg.Append(rdmarpc.Piece{Data: call[start:]})
			return nil
		case ulb.StepNeedMore:
			return fmt.Errorf("nfsclient: our own call is truncated (need %d bytes)", st.Need)
		}
		it := st.Item
		body := off + it.Offset
		msg.Append(rdmarpc.Piece{Data: call[start:body]})
		msg.Append(rdmarpc.Piece{Data: call[body : body+it.Length], Item: true})
		off = body + it.Length + it.Pad
		start = off
	}
}

// planReply fills plan from the ULB's estimate of the reply: a Write
// chunk per expected READ/READLINK item, and a Reply chunk when the rest
// may exceed our inline receive size (or its size cannot be told).
func (t *RDMA) planReply(plan *rdmarpc.ReplyPlan, rooms []int, prog, vers, proc uint32, args []byte) {
	est, err := ulb.EstimateReply(prog, vers, proc, args)
	if err != nil {
		// No estimate: offer a Reply chunk big enough for anything a
		// pool buffer holds, so the reply cannot fail for lack of room.
		plan.ReplyChunk = t.conn.Pool().MaxSize()
		return
	}
	plan.WriteChunks = est.WriteRooms(rooms)
	// AUTH_SYS calls: the reply verifier is AUTH_NONE, as estimated.
	plan.ReplyChunk = est.ReplyChunkRoom(t.inlineRecv-plan.ReplyHeaderMax(), 0, t.conn.Pool().MaxSize())
}

// spliceReply rebuilds the reply as it would be on a byte stream: every
// item whose body went to a Write chunk gets that body (and its XDR pad)
// back after its length word (ulb.AppendSplicedReply).
func spliceReply(res *rdmarpc.Result, plan *rdmarpc.ReplyPlan, prog, vers, proc uint32) ([]byte, error) {
	in := res.Inline
	var h tcprpc.ReplyHeader
	n, err := h.Decode(in)
	if err != nil {
		return nil, fmt.Errorf("nfsclient: bad reply header: %w", err)
	}
	placed := 0
	for _, c := range res.Chunks {
		placed += len(c) + 3
	}
	out := make([]byte, 0, len(in)+placed)
	if h.Stat != tcprpc.MsgAccepted || h.AcceptStat != tcprpc.Success || placed == 0 {
		return append(out, in...), nil
	}
	out = append(out, in[:n]...)
	var w ulb.Walker
	if err := w.Reset(ulb.Reply, prog, vers, proc); err != nil {
		return append(out, in[n:]...), nil
	}
	var store [2*ulb.MaxItems + 1][]byte
	vec, err := ulb.AppendSplicedReply(store[:0], &w, in[n:], res.Chunks, plan.WriteChunks)
	if err != nil {
		return nil, fmt.Errorf("nfsclient: %w", err)
	}
	for _, v := range vec {
		out = append(out, v...)
	}
	return out, nil
}
