package forward_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// RFC 8267 §6.4.1: when the client offered a Write chunk for a
// READ/READLINK result, the responder MUST put the result there. Where
// the forward gateway cannot (results it cannot walk, a result beyond
// its look-ahead, a result larger than its largest pool buffer) it used
// to send the result inline; now the call is answered SYSTEM_ERR and
// counted (rdmagw_backend_calls_failed_total{reason="ddp_impossible"}),
// and the connection carries on.

// callPlan sends one call with the given reply plan and returns the
// reply as received (not spliced) and its Write chunk contents.
func callPlan(t *testing.T, c *rdmaClient, prog, vers, proc uint32, args []byte, plan rdmarpc.ReplyPlan) (oncrpc.ReplyHeader, []byte, [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	xid := testXID.Add(1)
	head := gwtest.EncodeCall(xid, prog, vers, proc, args)
	hb, err := c.pool.Get(len(head))
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Release()
	copy(hb.Bytes, head)
	var msg rdmarpc.Message
	msg.Reset()
	msg.XID = xid
	msg.Append(rdmarpc.Piece{Data: hb.Bytes, Buf: hb})
	var r rdmarpc.Result
	if err := c.rq.Call(ctx, &msg, &plan, &r); err != nil {
		t.Fatalf("call: %v", err)
	}
	defer r.Release()
	var h oncrpc.ReplyHeader
	if _, err := h.Decode(r.Inline); err != nil {
		t.Fatalf("reply header: %v", err)
	}
	var chunks [][]byte
	for _, ch := range r.Chunks {
		chunks = append(chunks, append([]byte(nil), ch...))
	}
	return h, append([]byte(nil), r.Inline...), chunks
}

func wantDDPRefused(t *testing.T, gw *forward.Gateway, h oncrpc.ReplyHeader, c *rdmaClient) {
	t.Helper()
	if h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.SystemErr {
		t.Fatalf("answered %+v, want SYSTEM_ERR (the result may not go inline)", h)
	}
	if v := gwtest.Metric(t, gw.Metrics(), "rdmagw_backend_calls_failed_total", "reason", "ddp_impossible"); v != 1 {
		t.Errorf("calls failed{ddp_impossible} = %v, want 1", v)
	}
	if err := null3(c, 10*time.Second); err != nil {
		t.Fatalf("NULL after the refused reply: %v", err)
	}
}

// A READ larger than the gateway's largest pool buffer, from ganesha:
// the client offered a Write chunk (and a Reply chunk that could hold
// the data inline).
func TestForwardDDPItemLargerThanPool(t *testing.T) {
	g := nfstest.StartGanesha(t)
	const size = 512 << 10
	if err := os.WriteFile(filepath.Join(g.Dir, "big"), nfstest.Pattern(size, 9), 0o644); err != nil {
		t.Fatal(err)
	}
	gw := startGateway(t, g.NFSAddr, func(c *gateway.Config) {
		c.Pool.Classes = []gateway.ByteSize{4 << 10, 64 << 10, 256 << 10}
	})
	c := dialRDMA(t, gw.Addr().String())
	n := &nfs3{c: c, t: t}
	root := mount3(t, g.MountAddr, g.Export)
	d := n.call(3 /* LOOKUP */, new(enc).opaque(root).str("big").b, nil, nil)
	status(t, d, "LOOKUP")
	fh, _ := d.Opaque(64)
	fh = append([]byte(nil), fh...)
	h, _, chunks := callPlan(t, c, ulb.ProgNFS, 3, nfs3Read, new(enc).opaque(fh).u64(0).u32(size).b,
		rdmarpc.ReplyPlan{WriteChunks: []int{size}, ReplyChunk: size + 64<<10})
	if h.AcceptStat == oncrpc.Success && len(chunks) == 1 && len(chunks[0]) == 0 {
		t.Fatalf("READ result of %d bytes sent inline although a Write chunk was offered", size)
	}
	wantDDPRefused(t, gw, h, c)
}

// Results the walker cannot decode (a post_op_attr discriminant of 7),
// and an NFSv4 READ behind a GETATTR result larger than the reader's
// look-ahead: shapes a fake backend produces.
func TestForwardDDPNotWalkable(t *testing.T) {
	readGarbage := func(xid uint32) []byte {
		return new(enc).u32(xid).u32(1).u32(0).u32(0).u32(0).u32(0). // accepted SUCCESS
										u32(0).u32(7).u32(100).u32(1).opaque(make([]byte, 100)).b
	}
	bigAttr := func(xid uint32) []byte {
		e := new(enc).u32(xid).u32(1).u32(0).u32(0).u32(0).u32(0)
		e.u32(0).str("").u32(3)                                         // status, tag, 3 results
		e.u32(22).u32(0)                                                // PUTFH
		e.u32(9).u32(0).u32(1).u32(1 << 19).opaque(make([]byte, 40000)) // GETATTR: filehandle, 40 KB
		e.u32(25).u32(0).u32(1).opaque(make([]byte, 100))               // READ: eof, 100 bytes
		return e.b
	}
	for _, tc := range []struct {
		name       string
		vers, proc uint32
		args       []byte
		reply      func(xid uint32) []byte
	}{
		{"nfs3 garbage", 3, nfs3Read, new(enc).opaque(make([]byte, 8)).u64(0).u32(100).b, readGarbage},
		{"nfs4 beyond look-ahead", 4, 1, new(enc).str("").u32(0).u32(3).
			u32(22).opaque(make([]byte, 8)).
			u32(9).u32(1).u32(1 << 19).
			u32(25).opaque(make([]byte, 16)).u64(0).u32(100).b, bigAttr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fb := startFakeBackend(t, func(conn net.Conn, h *oncrpc.CallHeader) bool {
				return tcprpc.NewRecordWriter(conn, nil).WriteRecord(tc.reply(h.XID), nil, nil) == nil
			})
			gw := startGateway(t, fb.addr(), nil)
			c := dialRDMA(t, gw.Addr().String())
			h, _, chunks := callPlan(t, c, ulb.ProgNFS, tc.vers, tc.proc, tc.args,
				rdmarpc.ReplyPlan{WriteChunks: []int{100}, ReplyChunk: 64 << 10})
			if h.AcceptStat == oncrpc.Success && len(chunks) == 1 && len(chunks[0]) == 0 {
				t.Fatalf("result sent inline although a Write chunk was offered")
			}
			wantDDPRefused(t, gw, h, c)
		})
	}
}
