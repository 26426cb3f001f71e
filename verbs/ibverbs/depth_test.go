//go:build ibverbs && cgo

package ibverbs

import (
	"bytes"
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/Mellanox/rdmamap"
	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/verbstest"
)

// TestReadDepthsLinuxClient: the Linux NFS/RDMA client connects with
// initiator depth 0 and responder resources max_qp_rd_atom ("I serve RDMA
// Reads, I issue none"). The accepting side must then be able to have
// several RDMA Reads outstanding against it. The CM reports a REQ's depths
// swapped (from the listener's point of view); reading them the other way
// round accepts with initiator depth 0, so the client's QP serves no Reads
// and every one fails with a remote invalid request. The conformance suite
// cannot see this: both of its sides offer the same depths.
func TestReadDepthsLinuxClient(t *testing.T) {
	p := dialLinuxLike(t)
	ctx, pd, scq, srv := p.ctx, p.pd, p.scq, p.srv
	const n, size = 8, 64 << 10
	mem, err := verbs.Alloc(2 * n * size)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free()
	src, dst := mem.Bytes()[:n*size], mem.Bytes()[n*size:]
	for i := range src {
		src[i] = byte(i*7 + i>>9)
	}
	smr, err := pd.Register(src, verbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	defer smr.Deregister()
	dmr, err := pd.Register(dst, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer dmr.Deregister()

	// n Reads in one chain from the accepting side: all outstanding at
	// once, up to the negotiated depth.
	wrs := make([]verbs.SendWR, n)
	for i := range wrs {
		wrs[i] = verbs.SendWR{ID: uint64(i + 1), Op: verbs.OpRDMARead, Signal: true,
			SGL:        []verbs.SGE{{Buf: dst[i*size : (i+1)*size], LKey: dmr.LKey()}},
			RemoteAddr: smr.Addr() + uint64(i*size), RKey: smr.RKey()}
		if i > 0 {
			wrs[i-1].Next = &wrs[i]
		}
	}
	if err := srv.PostSend(&wrs[0]); err != nil {
		t.Fatalf("PostSend of %d RDMA Reads: %v", n, err)
	}
	var wcs [n]verbs.WC
	for got := 0; got < n; {
		k := scq.Poll(wcs[got:])
		for _, wc := range wcs[got : got+k] {
			if wc.Status != verbs.StatusSuccess {
				t.Fatalf("RDMA Read %d by the accepting side: %v (the client offered initiator depth 0, responder resources 16)", wc.ID, wc.Status)
			}
		}
		got += k
		if k == 0 {
			if err := scq.Wait(ctx); err != nil {
				t.Fatalf("waiting for %d RDMA Read completions (have %d): %v", n, got, err)
			}
		}
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("RDMA Reads completed but the data differs")
	}
}

// labPair is a connection on the lab's RDMA device, dialed as the Linux
// NFS client dials (initiator depth 0, responder resources 16) and
// accepted with depths 16: srv's completions go to scq, cli's to ccq.
type labPair struct {
	ctx      context.Context
	d        *device
	pd       verbs.PD
	scq, ccq verbs.CQ
	cli, srv verbs.Conn
}

// dialLinuxLike makes a labPair, or skips without an RDMA device. It is
// torn down when the test ends.
func dialLinuxLike(t *testing.T) *labPair {
	t.Helper()
	if len(rdmamap.GetRdmaDeviceList()) == 0 {
		t.Skip("no RDMA device on this host (the lab runs this test on soft-RoCE: make lab-verbs)")
	}
	host := os.Getenv(verbstest.EnvAddr)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	dv, err := New().Open(host)
	if err != nil {
		t.Fatalf("Open(%q): %v", host, err)
	}
	t.Cleanup(func() { dv.Close() })
	d := dv.(*device)
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pd.Close() })
	scq, err := d.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scq.Close() })
	ccq, err := d.CreateCQ(64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ccq.Close() })
	ln, err := d.Listen(net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	type accepted struct {
		c   verbs.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			acc <- accepted{nil, err}
			return
		}
		c, err := req.Accept(verbs.ConnOptions{PD: pd, SendCQ: scq, RecvCQ: scq, InitiatorDepth: 16, ResponderResources: 16})
		acc <- accepted{c, err}
	}()
	o, err := d.options(verbs.ConnOptions{PD: pd, SendCQ: ccq, RecvCQ: ccq, ResponderResources: 16})
	if err != nil {
		t.Fatal(err)
	}
	o.InitiatorDepth = 0 // what xprtrdma sends; ConnOptions' 0 means the default
	cli, err := d.dialWith(ctx, ln.Addr().String(), o)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	a := <-acc
	if a.err != nil {
		t.Fatalf("accept: %v", a.err)
	}
	t.Cleanup(func() { a.c.Close() })
	return &labPair{ctx: ctx, d: d, pd: pd, scq: scq, ccq: ccq, cli: cli, srv: a.c}
}

// TestPostSendPoster: on soft-RoCE a send chain that moves a page or more
// is handed to the connection's poster goroutine, because rxe's requester
// runs inside ibv_post_send and would hold the caller (post.go); a
// smaller one, and any chain on another device, is posted by the caller
// (a doorbell). A 200-byte Send (an RPC call), then a 4 KiB one (a READ
// reply's size, which went to the poster only from 64 KiB of RDMA Write
// or Read up before): both arrive intact, the poster does not exist
// after the first and exists after the second exactly on rxe.
func TestPostSendPoster(t *testing.T) {
	p := dialLinuxLike(t)
	const size = softPostBytes
	mem, err := verbs.Alloc(2 * size)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free()
	src, dst := mem.Bytes()[:size], mem.Bytes()[size:]
	for i := range src {
		src[i] = byte(i*13 + i>>8)
	}
	smr, err := p.pd.Register(src, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer smr.Deregister()
	dmr, err := p.pd.Register(dst, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer dmr.Deregister()
	q := &p.srv.(*conn).sq
	for i, n := range []int{200, size} {
		clear(dst)
		if err := p.cli.PostRecv(&verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: dst, LKey: dmr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		if err := p.srv.PostSend(&verbs.SendWR{ID: uint64(i), Op: verbs.OpSend, Signal: true,
			SGL: []verbs.SGE{{Buf: src[:n], LKey: smr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct {
			cq   verbs.CQ
			what string
		}{{p.scq, "the Send"}, {p.ccq, "its receive"}} {
			var wc [1]verbs.WC
			for w.cq.Poll(wc[:]) == 0 {
				if err := w.cq.Wait(p.ctx); err != nil {
					t.Fatalf("%d bytes: waiting for %s's completion: %v", n, w.what, err)
				}
			}
			if wc[0].Status != verbs.StatusSuccess {
				t.Fatalf("%d bytes: %s completed with %v", n, w.what, wc[0].Status)
			}
		}
		if !bytes.Equal(dst[:n], src[:n]) {
			t.Fatalf("a Send of %d bytes completed but the received bytes differ", n)
		}
		q.mu.Lock()
		onPoster := q.kick != nil
		q.mu.Unlock()
		if want := n >= softPostBytes && p.d.caps.softRoCE; onPoster != want {
			t.Errorf("after a Send of %d bytes on %s the poster exists: %t; want %t (post.go: on rxe the poster posts chains from softPostBytes, the caller the rest and everything elsewhere)",
				n, p.d.name, onPoster, want)
		}
	}
}
