package reverse_test

import (
	"context"
	"sync"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
)

// The skeleton of the reverse tests' RPC-over-RDMA servers on raw verbs
// (pure-Go iWARP): the scriptable fake server (reverse_fakesrv_test.go),
// the stale-rkey server (reverse_stalekey_test.go) and the cross-
// connection attacker (reverse_crossconn_test.go). Each keeps its own
// protocol logic; listening, accepting and setting up a connection's
// registered memory are here.

// startRDMAServer listens on a free loopback port and hands each
// connection request to accept, in arrival order; the func accept
// returns (nil: none) serves that connection on a goroutine of its own
// until ctx ends. At the test's end it stops listening, ends ctx, waits
// for every connection's func to return (then the device is closed).
func startRDMAServer(t testing.TB, accept func(req verbs.ConnRequest) func(ctx context.Context)) (verbs.Device, verbs.Listener) {
	t.Helper()
	dev := nfstest.OpenIWARP(t, "127.0.0.1")
	ln, err := dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			req, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			if serve := accept(req); serve != nil {
				wg.Add(1)
				go func() { defer wg.Done(); serve(ctx) }()
			}
		}
	}()
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	return dev, ln
}

// peerOptions shape an accepted connection.
type peerOptions struct {
	nrecv    int // receive buffers, posted at accept
	recvSize int // bytes each; also the inline sizes in the private data
	extra    int // registered bytes after the receive buffers (peerConn.rest)
	splitCQ  bool
	depth    int // InitiatorDepth and ResponderResources (0: the provider's)
}

// peerConn is an accepted connection: one protection domain, one
// registered region (mem: nrecv receive buffers of recvSize, then rest),
// a completion queue for receives (rcq) and one for sends and RDMA
// operations (scq; the same queue unless splitCQ).
type peerConn struct {
	conn     verbs.Conn
	pd       verbs.PD
	rcq, scq verbs.CQ
	mr       verbs.MR
	mem      []byte
	recvs    []verbs.RecvWR
	rest     []byte
}

// acceptPeer accepts req as an RPC-over-RDMA responder with o's
// buffers (RFC 8797 private data offering recvSize both ways); close
// releases everything.
func acceptPeer(dev verbs.Device, req verbs.ConnRequest, o peerOptions) (*peerConn, error) {
	c := &peerConn{}
	ok := false
	defer func() {
		if !ok {
			c.close()
		}
	}()
	var err error
	if c.pd, err = dev.AllocPD(); err != nil {
		return nil, err
	}
	if c.scq, err = dev.CreateCQ(64); err != nil {
		return nil, err
	}
	c.rcq = c.scq
	if o.splitCQ {
		if c.rcq, err = dev.CreateCQ(o.nrecv + 8); err != nil {
			c.rcq = nil
			return nil, err
		}
	}
	c.mem = make([]byte, o.nrecv*o.recvSize+o.extra)
	if c.mr, err = c.pd.Register(c.mem, verbs.AccessLocalWrite); err != nil {
		return nil, err
	}
	c.recvs = make([]verbs.RecvWR, o.nrecv)
	for i := range c.recvs {
		c.recvs[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Buf: c.mem[i*o.recvSize : (i+1)*o.recvSize], LKey: c.mr.LKey()}}}
		if i > 0 {
			c.recvs[i-1].Next = &c.recvs[i]
		}
	}
	c.rest = c.mem[o.nrecv*o.recvSize:]
	pdata := rdmarpc.PrivateData{MaxSendSize: o.recvSize, MaxRecvSize: o.recvSize}.Append(nil)
	if c.conn, err = req.Accept(verbs.ConnOptions{PD: c.pd, SendCQ: c.scq, RecvCQ: c.rcq, MaxSendWR: 16, MaxRecvWR: o.nrecv,
		MaxSGE: 2, PrivateData: pdata, InitialRecv: &c.recvs[0], InitiatorDepth: o.depth, ResponderResources: o.depth}); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func (c *peerConn) close() {
	if c.conn != nil {
		c.conn.Close()
	}
	if c.mr != nil {
		c.mr.Deregister()
	}
	if c.rcq != nil && c.rcq != c.scq {
		c.rcq.Close()
	}
	if c.scq != nil {
		c.scq.Close()
	}
	if c.pd != nil {
		c.pd.Close()
	}
}
