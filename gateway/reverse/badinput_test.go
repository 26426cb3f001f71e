package reverse_test

import (
	"net"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// Records that are not usable calls get their specified answer from the
// gateway itself, and the connection stays usable.
func TestReverseBadCalls(t *testing.T) {
	srv := startEvilServer(t)
	rev := startReverse(t, srv.ln.Addr().String(), scriptedV1Peer)
	conn, err := net.Dial("tcp", rev.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	rw := tcprpc.NewRecordWriter(conn, nil)
	rr := tcprpc.NewRecordReader(conn, nil)
	send := func(words ...uint32) {
		t.Helper()
		if err := rw.WriteRecord(gwtest.BE32(nil, words...), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	reply := func() oncrpc.ReplyHeader {
		t.Helper()
		b, err := rr.ReadRecord(nil)
		if err != nil {
			t.Fatal(err)
		}
		var h oncrpc.ReplyHeader
		if _, err := h.Decode(b); err != nil {
			t.Fatalf("reply %x: %v", b, err)
		}
		return h
	}
	// rpcvers 3: RPC_MISMATCH (2, 2).
	send(0x1001, 0, 3, 100003, 3, 0, 0, 0, 0, 0)
	if h := reply(); h.XID != 0x1001 || h.Stat != oncrpc.MsgDenied || h.RejectStat != oncrpc.RPCMismatch || h.Low != 2 || h.High != 2 {
		t.Fatalf("rpcvers 3 answered %+v", h)
	}
	// A credential over 400 bytes: AUTH_BADCRED.
	long := append(gwtest.BE32(nil, 0x1002, 0, 2, 100003, 3, 0, 1, 404), make([]byte, 404+8)...)
	if err := rw.WriteRecord(long, nil, nil); err != nil {
		t.Fatal(err)
	}
	if h := reply(); h.XID != 0x1002 || h.Stat != oncrpc.MsgDenied || h.RejectStat != oncrpc.AuthError || h.AuthStat != oncrpc.AuthBadCred {
		t.Fatalf("long credential answered %+v", h)
	}
	// A reply (msg_type 1) to no callback and a 3-byte record: dropped,
	// no answer; the NULL call after them is answered by the server.
	send(0x1003, 1, 0, 0, 0, 0)
	if err := rw.WriteRecord([]byte{1, 2, 3}, nil, nil); err != nil {
		t.Fatal(err)
	}
	send(0x1004, 0, 2, 100003, 3, 0, 0, 0, 0, 0)
	if h := reply(); h.XID != 0x1004 || h.Stat != oncrpc.MsgAccepted || h.AcceptStat != oncrpc.Success {
		t.Fatalf("NULL after the bad records answered %+v", h)
	}
	if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_calls_dropped_total", "reason", "not_rpc"); n != 1 {
		t.Errorf("not_rpc drops = %v, want 1", n)
	}
	if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_backchannel_errors_total", "reason", "unmatched"); n != 1 {
		t.Errorf("unmatched callback replies = %v, want 1", n)
	}
}
