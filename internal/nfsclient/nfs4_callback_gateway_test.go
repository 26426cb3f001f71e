package nfsclient_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/gateway/reverse/reversetest"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// cbProxy sits between rdmagw and ganesha on the backend TCP connection.
// It passes everything through and can inject RPC CALL records towards
// the gateway as if the server sent them (ganesha 4.3 with FSAL VFS or
// MEM grants no delegations and sends no callbacks by itself); REPLY
// records from the gateway are the answers to those and are kept.
type cbProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	gw      net.Conn
	wmu     sync.Mutex
	rw      *tcprpc.RecordWriter
	replies chan []byte
	ready   chan struct{}
}

func startCBProxy(t *testing.T, target string) *cbProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cbProxy{ln: ln, target: target, replies: make(chan []byte, 16), ready: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go func() {
		first := true
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); up.Close() })
			if first {
				p.mu.Lock()
				p.gw, p.rw = c, tcprpc.NewRecordWriter(c, nil)
				p.mu.Unlock()
				close(p.ready)
				first = false
			}
			mine := p.gw == c
			go func() { // server -> gateway
				rr := tcprpc.NewRecordReader(up, &tcprpc.ReaderConfig{MaxRecord: 4 << 20})
				rw := tcprpc.NewRecordWriter(c, nil)
				for {
					rec, err := rr.ReadRecord(nil)
					if err != nil {
						c.Close()
						return
					}
					if mine {
						p.wmu.Lock()
						err = p.rw.WriteRecord(rec, nil, nil)
						p.wmu.Unlock()
					} else {
						err = rw.WriteRecord(rec, nil, nil)
					}
					if err != nil {
						return
					}
				}
			}()
			go func() { // gateway -> server
				rr := tcprpc.NewRecordReader(c, &tcprpc.ReaderConfig{MaxRecord: 4 << 20})
				rw := tcprpc.NewRecordWriter(up, nil)
				for {
					rec, err := rr.ReadRecord(nil)
					if err != nil {
						up.Close()
						return
					}
					if _, mt, _ := oncrpc.PeekMsgType(rec); mt == oncrpc.Reply {
						p.replies <- rec
						continue
					}
					if err := rw.WriteRecord(rec, nil, nil); err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *cbProxy) inject(t *testing.T, call []byte) []byte {
	t.Helper()
	<-p.ready
	p.wmu.Lock()
	err := p.rw.WriteRecord(call, nil, nil)
	p.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-p.replies:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("no reply to the injected call xid %#x", binary.BigEndian.Uint32(call))
		return nil
	}
}

func cbCall(xid, proc uint32, body []byte) []byte {
	h := oncrpc.CallHeader{XID: xid, RPCVers: 2, Prog: nfsclient.CBProgram, Vers: 1, Proc: proc,
		Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
	b := make([]byte, h.EncodedLen()+len(body))
	e := xdr.NewEncoder(b)
	_ = h.Encode(&e)
	e.PutFixedOpaque(body)
	return e.Bytes()
}

// acceptedBody checks an accepted SUCCESS reply to xid and returns its body.
func acceptedBody(t *testing.T, rec []byte, xid uint32) []byte {
	t.Helper()
	var rh oncrpc.ReplyHeader
	n, err := rh.Decode(rec)
	if err != nil || rh.XID != xid || rh.Stat != oncrpc.MsgAccepted || rh.AcceptStat != oncrpc.Success {
		t.Fatalf("reply to %#x: %+v %v", xid, rh, err)
	}
	return rec[n:]
}

// The NFSv4.1 backchannel through rdmagw, end to end with a real client
// session on ganesha: callbacks on the backend TCP connection (CB_NULL,
// CB_COMPOUND with CB_SEQUENCE and CB_RECALL, a retransmission, one too
// big for the client's inline size) reach the client over iWARP as
// backward-direction calls, its replies come back on the TCP connection,
// and the server keeps reporting the callback path up.
func TestV41CallbacksThroughGateway(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startCBProxy(t, g.NFSAddr)
	gw := forwardtest.Start(t, px.ln.Addr().String())
	ctx := nfstest.Ctx(t)
	a := &nfsclient.V4{T: nfstest.DialRDMA(t, ctx, gw.Addr().String()), Callbacks: true}
	exchangeCallbacks(t, ctx, px, a, g.Export)
	counts := bcCounts(t, gw.Metrics())
	if counts["rdmagw_backchannel_calls_total"] != 3 || counts["rdmagw_backchannel_replies_total"] != 3 ||
		counts["rdmagw_backchannel_errors_total{too_big}"] != 1 {
		t.Fatalf("metrics %v", counts)
	}
	if err := a.DestroySession(ctx); err != nil {
		t.Fatal(err)
	}
}

// The same through both gateways: a TCP client whose session's back
// channel is its connection to the reverse gateway, which talks
// RPC-over-RDMA (pure-Go iWARP) to the forward gateway in front of
// ganesha. The server's callbacks cross the RDMA hop as backward-direction
// calls from the forward gateway (the responder) to the reverse gateway
// (the requester), which relays them as RPC calls on the client's TCP
// connection and sends the client's replies back as backward-direction
// replies.
func TestV41CallbacksThroughReverseGateway(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startCBProxy(t, g.NFSAddr)
	fwd := forwardtest.Start(t, px.ln.Addr().String())
	rev := reversetest.StartWith(t, fwd.Addr().String(), nil, nil)
	ctx := nfstest.Ctx(t)
	tr, err := nfsclient.DialTCP(ctx, rev.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	a := &nfsclient.V4{T: tr, Callbacks: true}
	exchangeCallbacks(t, ctx, px, a, g.Export)
	fc, rc := bcCounts(t, fwd.Metrics()), bcCounts(t, rev.Metrics())
	t.Logf("reverse gateway backchannel metrics: %v", rc)
	// The two gateways speak RPC-over-RDMA version two (the defaults):
	// the callbacks went as version-two backward calls.
	if v2 := versionConns(t, fwd.Metrics(), "2"); v2 != 1 {
		t.Errorf("forward gateway: %v version-two connections, want 1", v2)
	}
	if fc["rdmagw_backchannel_calls_total"] != 3 || fc["rdmagw_backchannel_replies_total"] != 3 {
		t.Errorf("forward gateway metrics %v", fc)
	}
	if rc["rdmagw_backchannel_calls_total"] != 3 || rc["rdmagw_backchannel_replies_total"] != 3 {
		t.Errorf("reverse gateway metrics %v", rc)
	}
	for k, v := range rc {
		if strings.HasPrefix(k, "rdmagw_backchannel_errors_total") && v != 0 {
			t.Errorf("reverse gateway: %s = %v", k, v)
		}
	}
	if err := a.DestroySession(ctx); err != nil {
		t.Fatal(err)
	}
}

// exchangeCallbacks sets up a's session with its back channel, then
// injects at px, as the server would send them, CB_NULL, a CB_COMPOUND
// (CB_SEQUENCE, CB_RECALL of a stateid the client does not hold), its
// retransmission (the cached reply) and one callback too big for an
// RPC-over-RDMA client's 4 KiB inline receive (answered SYSTEM_ERR by the
// forward gateway; it never reaches the client), and checks the replies,
// that the client served three, and that the server reports the callback
// path up before and after.
func exchangeCallbacks(t *testing.T, ctx context.Context, px *cbProxy, a *nfsclient.V4, export string) {
	t.Helper()
	if err := a.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.LookupPath(ctx, export); err != nil {
		t.Fatal(err)
	}
	if cbPathDown(a.SeqStatusFlags()) {
		t.Fatalf("status flags %#x", a.SeqStatusFlags())
	}

	// CB_NULL.
	if body := acceptedBody(t, px.inject(t, cbCall(0x7100, 0, nil)), 0x7100); len(body) != 0 {
		t.Fatalf("CB_NULL reply body %x", body)
	}
	// CB_COMPOUND: CB_SEQUENCE on slot 0, then CB_RECALL of a stateid the
	// client does not hold (NFS4ERR_BAD_STATEID).
	sid := a.SessionID()
	args := func(seq uint32) []byte {
		e := xdr.NewEncoder(make([]byte, 512))
		e.PutString("cb") // tag
		e.PutUint32(1)    // minorversion
		e.PutUint32(0)    // callback_ident
		e.PutUint32(2)
		e.PutUint32(11) // CB_SEQUENCE
		e.PutFixedOpaque(sid[:])
		e.PutUint32(seq)
		e.PutUint32(0) // slot
		e.PutUint32(0) // highest slot
		e.PutBool(false)
		e.PutUint32(0) // no referring call lists
		e.PutUint32(4) // CB_RECALL
		e.PutFixedOpaque(make([]byte, 16))
		e.PutBool(false)
		e.PutOpaque([]byte{1, 2, 3, 4})
		return e.Bytes()
	}
	first := acceptedBody(t, px.inject(t, cbCall(0x7101, 1, args(1))), 0x7101)
	d := xdr.NewDecoder(first)
	st, _ := d.Uint32()
	tag, _ := d.Opaque(64)
	n, _ := d.Uint32()
	op1, _ := d.Uint32()
	st1, _ := d.Uint32()
	rsid, _ := d.FixedOpaque(16)
	rseq, _ := d.Uint32()
	for range 3 {
		d.Uint32()
	}
	op2, _ := d.Uint32()
	st2, _ := d.Uint32()
	if st != 10025 || string(tag) != "cb" || n != 2 || op1 != 11 || st1 != 0 || !bytes.Equal(rsid, sid[:]) || rseq != 1 || op2 != 4 || st2 != 10025 {
		t.Fatalf("CB_COMPOUND result: status %d tag %q n %d op %d/%d seq %d op %d/%d", st, tag, n, op1, st1, rseq, op2, st2)
	}
	// A retransmission of the same slot and sequence gets the cached reply.
	again := acceptedBody(t, px.inject(t, cbCall(0x7102, 1, args(1))), 0x7102)
	if !bytes.Equal(again, first) {
		t.Fatal("replayed CB_SEQUENCE did not get the cached reply")
	}
	// Too big for the RDMA client's 4 KiB inline receive: the forward
	// gateway answers SYSTEM_ERR itself.
	var rh oncrpc.ReplyHeader
	if _, err := rh.Decode(px.inject(t, cbCall(0x7103, 1, make([]byte, 5000)))); err != nil ||
		rh.Stat != oncrpc.MsgAccepted || rh.AcceptStat != oncrpc.SystemErr {
		t.Fatalf("oversized callback: %+v %v", rh, err)
	}
	// The fore channel still works, with the callback path up.
	if _, _, err := a.LookupPath(ctx, export); err != nil {
		t.Fatal(err)
	}
	if cbPathDown(a.SeqStatusFlags()) {
		t.Fatalf("status flags %#x", a.SeqStatusFlags())
	}
	all, nulls := a.CallbacksServed()
	if all != 3 || nulls != 1 {
		t.Fatalf("client served %d callbacks (%d CB_NULL), want 3 (1)", all, nulls)
	}
}

// bcCounts are a gateway's rdmagw_backchannel_* counters, by name and
// {reason}.
// versionConns is rdmagw_rdma_connections_by_version_total{version=v}.
func versionConns(t *testing.T, m *gateway.Metrics, v string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metricname.RDMAConnectionsByVersionTotal {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "version" && l.GetValue() == v {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func bcCounts(t *testing.T, m *gateway.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "rdmagw_backchannel_") {
			for _, m := range mf.GetMetric() {
				k := mf.GetName()
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" {
						k += "{" + l.GetValue() + "}"
					}
				}
				counts[k] += m.GetCounter().GetValue()
			}
		}
	}
	t.Logf("gateway backchannel metrics: %v", counts)
	return counts
}

// The reverse gateway's backchannel bounds, with a raw TCP client that
// answers callbacks late or not at all: a callback unanswered within
// backchannel.timeout gets no reply (timeout), the late reply is dropped
// (unmatched), and one outstanding when the client disconnects is
// counted (client_gone). The fore channel keeps working throughout.
func TestReverseGatewayCallbackBounds(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startCBProxy(t, g.NFSAddr)
	// The forward gateway's credit for the unanswered callback must come
	// back too (it grants one until the first backward reply).
	short := func(c *gateway.Config) { c.Backchannel.Timeout = 300 * time.Millisecond }
	fwd := forwardtest.StartWith(t, px.ln.Addr().String(), short, nil)
	rev := reversetest.StartWith(t, fwd.Addr().String(), short, nil)
	conn, err := net.Dial("tcp", rev.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	rr := tcprpc.NewRecordReader(conn, nil)
	rw := tcprpc.NewRecordWriter(conn, nil)
	null := func(xid uint32) {
		t.Helper()
		h := oncrpc.CallHeader{XID: xid, RPCVers: 2, Prog: 100003, Vers: 4, Proc: 0, Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
		e := xdr.NewEncoder(make([]byte, h.EncodedLen()))
		_ = h.Encode(&e)
		if err := rw.WriteRecord(e.Bytes(), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// next reads the next record from the gateway.
	next := func() []byte {
		t.Helper()
		rec, err := rr.ReadRecord(nil)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	null(1)
	acceptedBody(t, next(), 1) // the chain is up, the proxy has its connection
	<-px.ready
	send := func(call []byte) {
		t.Helper()
		px.wmu.Lock()
		err := px.rw.WriteRecord(call, nil, nil)
		px.wmu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Not answered: the client gets the call, the server no reply.
	send(cbCall(0x7200, 0, nil))
	if rec := next(); binary.BigEndian.Uint32(rec) != 0x7200 || binary.BigEndian.Uint32(rec[4:]) != 0 {
		t.Fatalf("client got %x, want the CB_NULL call 0x7200", rec[:8])
	}
	rc := func(reason string) float64 {
		return bcCounts(t, rev.Metrics())["rdmagw_backchannel_errors_total{"+reason+"}"]
	}
	deadline := time.Now().Add(20 * time.Second)
	for rc("timeout") < 1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if rc("timeout") != 1 {
		t.Fatal("no timeout counted for the unanswered callback")
	}
	// The late reply matches nothing.
	rh := oncrpc.AcceptedReply(0x7200, oncrpc.Success)
	e := xdr.NewEncoder(make([]byte, rh.EncodedLen()))
	_ = rh.Encode(&e)
	if err := rw.WriteRecord(e.Bytes(), nil, nil); err != nil {
		t.Fatal(err)
	}
	null(2) // after the late reply, on the same connection
	acceptedBody(t, next(), 2)
	if rc("unmatched") != 1 {
		t.Fatalf("unmatched = %v after a late callback reply", rc("unmatched"))
	}
	select {
	case r := <-px.replies:
		t.Fatalf("the server got a reply %x to the unanswered callback", r)
	default:
	}

	// Outstanding when the client goes: counted, and the RDMA
	// connection, which fails the server's callbacks, closes with the
	// session.
	send(cbCall(0x7201, 0, nil))
	if rec := next(); binary.BigEndian.Uint32(rec) != 0x7201 {
		t.Fatalf("client got %x, want the CB_NULL call 0x7201", rec[:8])
	}
	conn.Close()
	for rc("client_gone") < 1 && time.Now().Before(deadline.Add(20*time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	if rc("client_gone") != 1 {
		t.Fatalf("client_gone = %v", rc("client_gone"))
	}
}
