package iwarp

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// Both ends send the moment their Conn exists, with no other
// synchronisation: the acceptor's Send may reach the dialer before Dial
// has returned, and the dialer's before Accept has. Only receives posted
// with ConnOptions.InitialRecv can catch them; without them iWARP (no RNR
// retry) would end the connection. 200 rounds, every one must deliver
// both messages intact.
func TestInitialRecvFirstSendNeverRNR(t *testing.T) {
	p := New(Config{})
	cli, srv := newSide(t, p), newSide(t, p)
	ln, err := srv.dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const msg, slot = 40, 64
	cin, cout := cli.mem(t, 2*slot, allAccess), cli.mem(t, msg, 0)
	sin, sout := srv.mem(t, 2*slot, allAccess), srv.mem(t, msg, 0)
	recvs := func(in verbs.MR) *verbs.RecvWR {
		second := &verbs.RecvWR{ID: 2, SGL: []verbs.SGE{{Buf: in.Bytes()[slot : 2*slot], LKey: in.LKey()}}}
		return &verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: in.Bytes()[:slot], LKey: in.LKey()}}, Next: second}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for round := range 200 {
		fill(cout.Bytes(), byte(2*round))
		fill(sout.Bytes(), byte(2*round+1))
		clear(cin.Bytes())
		clear(sin.Bytes())
		cq := func(s *side) verbs.CQ {
			q, err := s.dev.CreateCQ(16)
			if err != nil {
				t.Fatal(err)
			}
			return q
		}
		cscq, crcq, sscq, srcq := cq(cli), cq(cli), cq(srv), cq(srv)
		send := func(c verbs.Conn, out verbs.MR) error {
			return c.PostSend(&verbs.SendWR{ID: 7, Op: verbs.OpSend, Signal: true,
				SGL: []verbs.SGE{{Buf: out.Bytes(), LKey: out.LKey()}}})
		}
		type res struct {
			c   verbs.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			req, err := ln.Accept(ctx)
			if err != nil {
				ch <- res{nil, err}
				return
			}
			o := verbs.ConnOptions{PD: srv.pd, SendCQ: sscq, RecvCQ: srcq, MaxRecvWR: 2, InitialRecv: recvs(sin)}
			c, err := req.Accept(o)
			if err == nil {
				err = send(c, sout) // at once: the dialer may not have its Conn yet
			}
			ch <- res{c, err}
		}()
		o := verbs.ConnOptions{PD: cli.pd, SendCQ: cscq, RecvCQ: crcq, MaxRecvWR: 2, InitialRecv: recvs(cin)}
		cc, err := cli.dev.Dial(ctx, ln.Addr().String(), o)
		if err == nil {
			err = send(cc, cout) // at once: Accept may not have returned yet
		}
		r := <-ch
		if err != nil || r.err != nil {
			t.Fatalf("round %d: dial/send %v, accept/send %v", round, err, r.err)
		}
		sc := r.c
		check := func(who string, c verbs.Conn, scq, rcq verbs.CQ, in, want verbs.MR) {
			t.Helper()
			wc := wait(t, rcq)
			if wc.ID != 1 || wc.Op != verbs.OpRecv || wc.Status != verbs.StatusSuccess || wc.ByteLen != msg || wc.Conn != c {
				t.Fatalf("round %d: %s receive %+v (conn err %v), want ID 1, %d bytes, success", round, who, wc, c.Err(), msg)
			}
			sameBytes(t, in.Bytes()[:msg], want.Bytes())
			for _, b := range in.Bytes()[msg:] {
				if b != 0 {
					t.Fatalf("round %d: %s: bytes written past the message", round, who)
				}
			}
			wc = wait(t, scq)
			if wc.ID != 7 || wc.Op != verbs.OpSend || wc.Status != verbs.StatusSuccess || wc.Conn != c {
				t.Fatalf("round %d: %s send %+v (conn err %v), want success", round, who, wc, c.Err())
			}
		}
		check("client", cc, cscq, crcq, cin, sout)
		check("server", sc, sscq, srcq, sin, cout)
		cc.Close()
		sc.Close()
		// The second initial receive of each end flushes, proving it was
		// posted on the right queue and nothing else consumed it.
		for _, q := range []verbs.CQ{crcq, srcq} {
			if wc := wait(t, q); wc.ID != 2 || wc.Status != verbs.StatusFlushed {
				t.Fatalf("round %d: after Close: %+v, want ID 2 flushed", round, wc)
			}
		}
		for _, q := range []verbs.CQ{cscq, crcq, sscq, srcq} {
			q.Close()
		}
	}
}

// InitialRecv is checked like PostRecv, before anything is sent: a chain
// longer than MaxRecvWR fails Dial without a connect request, and fails
// Accept with a rejection the dialer sees.
func TestInitialRecvErrors(t *testing.T) {
	p := New(Config{})
	cli, srv := newSide(t, p), newSide(t, p)
	ln, err := srv.dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	in := cli.mem(t, 64, allAccess)
	three := &verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: in.Bytes(), LKey: in.LKey()}},
		Next: &verbs.RecvWR{ID: 2, Next: &verbs.RecvWR{ID: 3}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	o := cli.opts(nil)
	o.MaxRecvWR, o.InitialRecv = 2, three
	if _, err := cli.dev.Dial(ctx, ln.Addr().String(), o); !errors.Is(err, verbs.ErrQueueFull) {
		t.Fatalf("Dial with 3 initial receives and MaxRecvWR 2: %v, want ErrQueueFull", err)
	}
	// No connect request was sent: the listener has nothing to accept.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	if req, err := ln.Accept(short); err == nil {
		t.Fatalf("a failed Dial still sent a connect request from %s", req.RemoteAddr())
	}
	cancelShort()

	sin := srv.mem(t, 64, allAccess)
	accErr := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			accErr <- err
			return
		}
		so := srv.opts(nil)
		so.MaxRecvWR = 2
		so.InitialRecv = &verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: sin.Bytes(), LKey: sin.LKey()}},
			Next: &verbs.RecvWR{ID: 2, Next: &verbs.RecvWR{ID: 3}}}
		c, err := req.Accept(so)
		if c != nil {
			c.Close()
			err = fmt.Errorf("Accept succeeded")
		}
		accErr <- err
	}()
	_, err = cli.dev.Dial(ctx, ln.Addr().String(), cli.opts(nil))
	var rej *verbs.RejectError
	if !errors.As(err, &rej) {
		t.Fatalf("Dial to an Accept whose InitialRecv cannot be posted: %v, want a RejectError", err)
	}
	if err := <-accErr; !errors.Is(err, verbs.ErrQueueFull) {
		t.Fatalf("Accept with 3 initial receives and MaxRecvWR 2: %v, want ErrQueueFull", err)
	}
}

// With an SRQ, InitialRecv is ignored: the message lands in the SRQ's
// receive, and the InitialRecv buffer is never touched.
func TestInitialRecvIgnoredWithSRQ(t *testing.T) {
	p := New(Config{})
	cli, srv := newSide(t, p), newSide(t, p)
	ln, err := srv.dev.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	q, err := srv.pd.CreateSRQ(4)
	if err != nil {
		t.Fatal(err)
	}
	srqBuf, ignored := srv.mem(t, 64, allAccess), srv.mem(t, 64, allAccess)
	if err := q.PostRecv(&verbs.RecvWR{ID: 10, SGL: []verbs.SGE{{Buf: srqBuf.Bytes(), LKey: srqBuf.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch := make(chan error, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			ch <- err
			return
		}
		o := srv.opts(nil)
		o.SRQ = q
		o.InitialRecv = &verbs.RecvWR{ID: 20, SGL: []verbs.SGE{{Buf: ignored.Bytes(), LKey: ignored.LKey()}}}
		srv.conn, err = req.Accept(o)
		ch <- err
	}()
	cli.conn, err = cli.dev.Dial(ctx, ln.Addr().String(), cli.opts(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	out := cli.mem(t, 48, 0)
	fill(out.Bytes(), 9)
	if err := cli.conn.PostSend(&verbs.SendWR{ID: 1, Op: verbs.OpSend, Signal: true, SGL: []verbs.SGE{{Buf: out.Bytes(), LKey: out.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	wc := wait(t, srv.rcq)
	if wc.ID != 10 || wc.Status != verbs.StatusSuccess || wc.ByteLen != 48 {
		t.Fatalf("receive %+v, want the SRQ's ID 10 with 48 bytes", wc)
	}
	sameBytes(t, srqBuf.Bytes()[:48], out.Bytes())
	for _, b := range ignored.Bytes() {
		if b != 0 {
			t.Fatal("the ignored InitialRecv buffer was written")
		}
	}
	q.Close()
}
