package iwarp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// violation runs one bad work request and checks what each side sees.
func TestRemoteViolations(t *testing.T) {
	cases := []struct {
		name       string
		op         verbs.Opcode
		access     verbs.Access
		addr       func(m verbs.MR) uint64
		rkey       func(m verbs.MR) uint32
		invalidate bool
		layer      uint8
		etype      uint8
		code       uint8
	}{
		{name: "write bad stag", op: verbs.OpRDMAWrite, access: allAccess, rkey: func(m verbs.MR) uint32 { return m.RKey() ^ 0x100 },
			layer: LayerDDP, etype: DDPTaggedBuffer, code: DDPTaggedInvalidSTag},
		{name: "write stale key", op: verbs.OpRDMAWrite, access: allAccess, rkey: func(m verbs.MR) uint32 { return m.RKey() + 1 },
			layer: LayerDDP, etype: DDPTaggedBuffer, code: DDPTaggedInvalidSTag},
		{name: "write out of bounds", op: verbs.OpRDMAWrite, access: allAccess, addr: func(m verbs.MR) uint64 { return m.Addr() + 4096 - 10 },
			layer: LayerDDP, etype: DDPTaggedBuffer, code: DDPTaggedBaseBounds},
		{name: "write below base", op: verbs.OpRDMAWrite, access: allAccess, addr: func(m verbs.MR) uint64 { return m.Addr() - 1 },
			layer: LayerDDP, etype: DDPTaggedBuffer, code: DDPTaggedBaseBounds},
		{name: "write read-only region", op: verbs.OpRDMAWrite, access: verbs.AccessLocalWrite | verbs.AccessRemoteRead,
			layer: LayerRDMAP, etype: RDMAPRemoteProtection, code: RDMAPAccessRights},
		{name: "write invalidated", op: verbs.OpRDMAWrite, access: allAccess, invalidate: true,
			layer: LayerDDP, etype: DDPTaggedBuffer, code: DDPTaggedInvalidSTag},
		{name: "read bad stag", op: verbs.OpRDMARead, access: allAccess, rkey: func(m verbs.MR) uint32 { return 0xdead00 },
			layer: LayerRDMAP, etype: RDMAPRemoteProtection, code: RDMAPInvalidSTag},
		{name: "read out of bounds", op: verbs.OpRDMARead, access: allAccess, addr: func(m verbs.MR) uint64 { return m.Addr() + 4000 },
			layer: LayerRDMAP, etype: RDMAPRemoteProtection, code: RDMAPBaseBounds},
		{name: "read write-only region", op: verbs.OpRDMARead, access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite,
			layer: LayerRDMAP, etype: RDMAPRemoteProtection, code: RDMAPAccessRights},
		{name: "read invalidated", op: verbs.OpRDMARead, access: allAccess, invalidate: true,
			layer: LayerRDMAP, etype: RDMAPRemoteProtection, code: RDMAPInvalidSTag},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cli, srv := pair(t, Config{}, "")
			remote := srv.mem(t, 4096, tc.access)
			local := cli.mem(t, 4096, allAccess)
			if tc.invalidate {
				remote.Invalidate()
				if remote.Valid() {
					t.Fatal("Valid after Invalidate")
				}
			}
			addr, rkey := remote.Addr(), remote.LKey()
			if tc.addr != nil {
				addr = tc.addr(remote)
			}
			if tc.rkey != nil {
				rkey = tc.rkey(remote)
			}
			// A good Write first: it must complete successfully, in order.
			good := &verbs.SendWR{ID: 1, Op: verbs.OpRDMAWrite, Signal: true, SGL: []verbs.SGE{{Buf: local.Bytes()[:64], LKey: local.LKey()}},
				RemoteAddr: remote.Addr(), RKey: remote.LKey()}
			if tc.op == verbs.OpRDMAWrite || tc.invalidate || tc.access&verbs.AccessRemoteWrite == 0 {
				good = nil
			}
			bad := &verbs.SendWR{ID: 2, Op: tc.op, Signal: true, SGL: []verbs.SGE{{Buf: local.Bytes()[:100], LKey: local.LKey()}},
				RemoteAddr: addr, RKey: rkey}
			after := &verbs.SendWR{ID: 3, Op: verbs.OpSend, Signal: false, SGL: []verbs.SGE{{Buf: local.Bytes()[:8], LKey: local.LKey()}}}
			bad.Next = after
			if good != nil {
				good.Next = bad
			} else {
				good = bad
			}
			if err := cli.conn.PostSend(good); err != nil {
				t.Fatal(err)
			}
			if good != bad {
				expectStatus(t, wait(t, cli.scq), verbs.OpRDMAWrite, verbs.StatusSuccess)
			}
			wc := wait(t, cli.scq)
			expectStatus(t, wc, tc.op, verbs.StatusRemoteAccess)
			if wc.ID != 2 || wc.Conn != cli.conn {
				t.Fatalf("completion %+v", wc)
			}
			wc = wait(t, cli.scq)
			expectStatus(t, wc, verbs.OpSend, verbs.StatusFlushed)
			waitDone(t, cli.conn)
			waitDone(t, srv.conn)
			got, sent := asTerminate(cli.conn.Err()), asTerminate(srv.conn.Err())
			if got == nil || sent == nil || got.Sent || !sent.Sent {
				t.Fatalf("errors: requester %v, responder %v", cli.conn.Err(), srv.conn.Err())
			}
			if got.Layer != tc.layer || got.EType != tc.etype || got.Code != tc.code {
				t.Fatalf("requester got %v, want layer %d type %d code %#x", got, tc.layer, tc.etype, tc.code)
			}
			if !errors.Is(cli.conn.Err(), ErrTerminated) {
				t.Fatal("not ErrTerminated")
			}
			if err := cli.conn.PostSend(after); !errors.Is(err, verbs.ErrNotConnected) {
				t.Fatalf("PostSend after Terminate: %v", err)
			}
		})
	}
}

func TestSendWithInvalidate(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	exposed := srv.mem(t, 4096, allAccess)
	rbuf := srv.mem(t, 4096, verbs.AccessLocalWrite)
	sbuf := cli.mem(t, 4096, allAccess)
	srv.conn.PostRecv(&verbs.RecvWR{ID: 7, SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}})
	// Write works before invalidation.
	if err := cli.conn.PostSend(&verbs.SendWR{ID: 1, Op: verbs.OpRDMAWrite, Signal: true, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:16], LKey: sbuf.LKey()}},
		RemoteAddr: exposed.Addr(), RKey: exposed.RKey(),
		Next: &verbs.SendWR{ID: 2, Op: verbs.OpSendInv, Signal: true, InvalidateRKey: exposed.RKey(), SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:32], LKey: sbuf.LKey()}}}}); err != nil {
		t.Fatal(err)
	}
	expectStatus(t, wait(t, cli.scq), verbs.OpRDMAWrite, verbs.StatusSuccess)
	expectStatus(t, wait(t, cli.scq), verbs.OpSendInv, verbs.StatusSuccess)
	wc := wait(t, srv.rcq)
	expectStatus(t, wc, verbs.OpRecv, verbs.StatusSuccess)
	if !wc.Invalidated || wc.InvalidatedRKey != exposed.RKey() || wc.ByteLen != 32 {
		t.Fatalf("recv completion %+v", wc)
	}
	if exposed.Valid() {
		t.Fatal("region still valid after Send with Invalidate")
	}
	// Now the rkey is dead: a Write gets a remote access error.
	cli.conn.PostSend(&verbs.SendWR{ID: 3, Op: verbs.OpRDMAWrite, Signal: true, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:16], LKey: sbuf.LKey()}},
		RemoteAddr: exposed.Addr(), RKey: exposed.RKey()})
	expectStatus(t, wait(t, cli.scq), verbs.OpRDMAWrite, verbs.StatusRemoteAccess)
}

func TestSendInvalidateUnknownSTag(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	rbuf := srv.mem(t, 4096, verbs.AccessLocalWrite)
	sbuf := cli.mem(t, 4096, allAccess)
	srv.conn.PostRecv(&verbs.RecvWR{ID: 7, SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}})
	cli.conn.PostSend(&verbs.SendWR{ID: 2, Op: verbs.OpSendInv, Signal: true, InvalidateRKey: 0xabcdef01, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:32], LKey: sbuf.LKey()}}})
	expectStatus(t, wait(t, cli.scq), verbs.OpSendInv, verbs.StatusRemoteInvalidReq)
	expectStatus(t, wait(t, srv.rcq), verbs.OpRecv, verbs.StatusRemoteInvalidReq)
	waitDone(t, srv.conn)
	if te := asTerminate(srv.conn.Err()); te == nil || te.Code != RDMAPCannotInvalidate {
		t.Fatalf("responder error %v", srv.conn.Err())
	}
}

func TestStaleKeyAfterReregistration(t *testing.T) {
	_, srv := pair(t, Config{}, "")
	a := srv.mem(t, 4096, allAccess)
	old := a.RKey()
	a.Deregister()
	b := srv.mem(t, 4096, allAccess)
	if b.RKey() == old || b.RKey()>>8 != old>>8 {
		t.Fatalf("new rkey %#x vs retired %#x: want the same index with another key", b.RKey(), old)
	}
	if srv.dev.(*device).lookup(old) != nil {
		t.Fatal("retired key still resolves")
	}
}

func TestRNR(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	sbuf := cli.mem(t, 4096, allAccess)
	rbuf := srv.mem(t, 4096, allAccess)
	srv.conn.PostRecv(&verbs.RecvWR{ID: 9, SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}})
	wr := &verbs.SendWR{ID: 1, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:10], LKey: sbuf.LKey()}},
		Next: &verbs.SendWR{ID: 2, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:10], LKey: sbuf.LKey()}}}}
	cli.conn.PostSend(wr)
	expectStatus(t, wait(t, cli.scq), verbs.OpSend, verbs.StatusSuccess)
	wc := wait(t, cli.scq)
	expectStatus(t, wc, verbs.OpSend, verbs.StatusRNR)
	if wc.ID != 2 {
		t.Fatalf("RNR on %+v", wc)
	}
	expectStatus(t, wait(t, srv.rcq), verbs.OpRecv, verbs.StatusSuccess)
	waitDone(t, srv.conn)
	te := asTerminate(srv.conn.Err())
	if te == nil || !te.Sent || te.Layer != LayerDDP || te.EType != DDPUntaggedBuffer || te.Code != DDPUntaggedNoBuffer {
		t.Fatalf("responder error %v", srv.conn.Err())
	}
}

func TestReceiveTooSmall(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	sbuf := cli.mem(t, 4096, allAccess)
	rbuf := srv.mem(t, 4096, allAccess)
	srv.conn.PostRecv(&verbs.RecvWR{ID: 9, SGL: []verbs.SGE{{Buf: rbuf.Bytes()[:100], LKey: rbuf.LKey()}}})
	srv.conn.PostRecv(&verbs.RecvWR{ID: 10, SGL: []verbs.SGE{{Buf: rbuf.Bytes()[:100], LKey: rbuf.LKey()}}})
	cli.conn.PostSend(&verbs.SendWR{ID: 1, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:101], LKey: sbuf.LKey()}}})
	wc := wait(t, srv.rcq)
	expectStatus(t, wc, verbs.OpRecv, verbs.StatusLocalLength)
	if wc.ID != 9 {
		t.Fatalf("%+v", wc)
	}
	expectStatus(t, wait(t, srv.rcq), verbs.OpRecv, verbs.StatusFlushed)
	expectStatus(t, wait(t, cli.scq), verbs.OpSend, verbs.StatusRemoteInvalidReq)
}

func TestLocalProtection(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	sbuf := cli.mem(t, 4096, allAccess)
	other := make([]byte, 64)
	cli.conn.PostSend(&verbs.SendWR{ID: 1, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: other, LKey: sbuf.LKey()}},
		Next: &verbs.SendWR{ID: 2, Op: verbs.OpSend, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:1], LKey: sbuf.LKey()}}}})
	expectStatus(t, wait(t, cli.scq), verbs.OpSend, verbs.StatusLocalProtection)
	expectStatus(t, wait(t, cli.scq), verbs.OpSend, verbs.StatusFlushed)
	waitDone(t, srv.conn)
	if te := asTerminate(srv.conn.Err()); te == nil || te.Sent {
		t.Fatalf("peer error %v", srv.conn.Err())
	}
}

func TestDisconnectFlushes(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	rbuf := srv.mem(t, 4096, allAccess)
	for i := range 5 {
		srv.conn.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}})
	}
	srv.conn.Disconnect()
	waitDone(t, srv.conn)
	waitDone(t, cli.conn)
	if srv.conn.Err() != nil {
		t.Fatalf("local disconnect: Err = %v", srv.conn.Err())
	}
	if !errors.Is(cli.conn.Err(), verbs.ErrNotConnected) {
		t.Fatalf("peer of a disconnect: Err = %v", cli.conn.Err())
	}
	for i := range 5 {
		wc := wait(t, srv.rcq)
		expectStatus(t, wc, verbs.OpRecv, verbs.StatusFlushed)
		if wc.ID != uint64(i) {
			t.Fatalf("flush order: %+v", wc)
		}
	}
	if err := srv.conn.PostRecv(&verbs.RecvWR{}); !errors.Is(err, verbs.ErrNotConnected) {
		t.Fatalf("PostRecv after disconnect: %v", err)
	}
}

func TestReject(t *testing.T) {
	p := New(Config{})
	cli, srv := newSide(t, p), newSide(t, p)
	ln, err := srv.dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		req, err := ln.Accept(context.Background())
		if err == nil {
			if string(req.PrivateData()) != "hello" {
				req.Reject([]byte("bad pd"))
				return
			}
			req.Reject([]byte("go away"))
		}
	}()
	_, err = cli.dev.Dial(context.Background(), ln.Addr().String(), cli.opts([]byte("hello")))
	var rej *verbs.RejectError
	if !errors.As(err, &rej) || !errors.Is(err, verbs.ErrRejected) || string(rej.PrivateData) != "go away" {
		t.Fatalf("Dial: %v", err)
	}
}

func TestDialTimeout(t *testing.T) {
	p := New(Config{})
	cli := newSide(t, p)
	ln, err := (&device{}).Listen("127.0.0.1:0") // never answers: no Accept consumer needed, handshake waits
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o := cli.opts(nil)
	o.Timeout = 200 * time.Millisecond
	start := time.Now()
	// The listener's handshake reads the request and queues it; nobody
	// accepts, so no Reply comes.
	_, err = cli.dev.Dial(context.Background(), ln.Addr().String(), o)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("Dial: %v after %v", err, time.Since(start))
	}
}

func TestQueueLimitsAndChains(t *testing.T) {
	cli, srv := pair(t, Config{}, "")
	sbuf := cli.mem(t, 4096, allAccess)
	rbuf := srv.mem(t, 64*128, allAccess)
	// Receive queue depth 64.
	var chain *verbs.RecvWR
	for i := 64; i > 0; i-- {
		chain = &verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: rbuf.Bytes()[(i-1)*128 : i*128], LKey: rbuf.LKey()}}, Next: chain}
	}
	if err := srv.conn.PostRecv(chain); err != nil {
		t.Fatal(err)
	}
	if err := srv.conn.PostRecv(&verbs.RecvWR{ID: 99}); !errors.Is(err, verbs.ErrQueueFull) {
		t.Fatalf("65th receive: %v", err)
	}
	// Send queue depth 64: a 65-long chain is refused whole.
	var sc *verbs.SendWR
	for i := 65; i > 0; i-- {
		sc = &verbs.SendWR{ID: uint64(i), Op: verbs.OpSend, Signal: i%8 == 0, SGL: []verbs.SGE{{Buf: sbuf.Bytes()[:i], LKey: sbuf.LKey()}}, Next: sc}
	}
	if err := cli.conn.PostSend(sc); !errors.Is(err, verbs.ErrQueueFull) {
		t.Fatalf("65-WR chain: %v", err)
	}
	if err := cli.conn.PostSend(sc.Next); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 65; i++ {
		wc := wait(t, srv.rcq)
		if wc.Status != verbs.StatusSuccess || wc.ID != uint64(i-1) || wc.ByteLen != i {
			t.Fatalf("recv %d: %+v", i, wc)
		}
	}
	// Only the signalled ones complete, in order.
	for i := 8; i <= 64; i += 8 {
		wc := wait(t, cli.scq)
		if wc.Status != verbs.StatusSuccess || wc.ID != uint64(i) {
			t.Fatalf("send completion: %+v, want ID %d", wc, i)
		}
	}
	if n := cli.scq.Poll(make([]verbs.WC, 4)); n != 0 {
		t.Fatalf("%d extra completions", n)
	}
}

func TestSRQ(t *testing.T) {
	p := New(Config{})
	srv := newSide(t, p)
	srq, err := srv.pd.CreateSRQ(16)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := srv.dev.Listen("127.0.0.1:0")
	defer ln.Close()
	rbuf := srv.mem(t, 16*256, allAccess)
	for i := range 16 {
		srq.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: rbuf.Bytes()[i*256 : (i+1)*256], LKey: rbuf.LKey()}}})
	}
	var clis []*side
	var srvConns []verbs.Conn
	accepted := make(chan verbs.Conn, 3)
	for i := range 3 {
		cli := newSide(t, p)
		go func() {
			req, _ := ln.Accept(context.Background())
			o := srv.opts(nil)
			o.SRQ = srq
			c, err := req.Accept(o)
			if err != nil {
				t.Error(err)
			}
			accepted <- c
		}()
		c, err := cli.dev.Dial(context.Background(), ln.Addr().String(), cli.opts([]byte{byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		cli.conn = c
		clis = append(clis, cli)
		if err := c.PostRecv(&verbs.RecvWR{}); err != nil {
			// the client has its own RQ
			t.Fatal(err)
		}
	}
	for range 3 {
		srvConns = append(srvConns, <-accepted)
	}
	for _, sc := range srvConns {
		if err := sc.PostRecv(&verbs.RecvWR{}); !errors.Is(err, verbs.ErrSRQ) {
			t.Fatalf("PostRecv on an SRQ conn: %v", err)
		}
	}
	for i, cli := range clis {
		b := cli.mem(t, 64, allAccess)
		b.Bytes()[0] = byte(i + 1)
		cli.conn.PostSend(&verbs.SendWR{Op: verbs.OpSend, SGL: []verbs.SGE{{Buf: b.Bytes()[:1], LKey: b.LKey()}}})
	}
	seen := map[verbs.Conn]bool{}
	for range 3 {
		wc := wait(t, srv.rcq)
		expectStatus(t, wc, verbs.OpRecv, verbs.StatusSuccess)
		if wc.Conn == nil || seen[wc.Conn] {
			t.Fatalf("WC.Conn %v", wc.Conn)
		}
		seen[wc.Conn] = true
		i := int(rbuf.Bytes()[wc.ID*256]) - 1
		if string(wc.Conn.PrivateData()) != string([]byte{byte(i)}) {
			t.Fatalf("message from client %d arrived on conn with private data %v", i, wc.Conn.PrivateData())
		}
	}
}
