package iwarp

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// side is one end of a test connection.
type side struct {
	dev  verbs.Device
	pd   verbs.PD
	scq  verbs.CQ
	rcq  verbs.CQ
	conn verbs.Conn
	sqWR int // MaxSendWR (0: 64)
}

func newSide(t testing.TB, p verbs.Provider) *side {
	t.Helper()
	d, err := p.Open("")
	if err != nil {
		t.Fatal(err)
	}
	pd, err := d.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	scq, _ := d.CreateCQ(1024)
	rcq, _ := d.CreateCQ(1024)
	s := &side{dev: d, pd: pd, scq: scq, rcq: rcq}
	t.Cleanup(func() {
		if s.conn != nil {
			s.conn.Close()
		}
		scq.Close()
		rcq.Close()
		d.Close()
	})
	return s
}

func (s *side) opts(pd []byte) verbs.ConnOptions {
	sqWR := 64
	if s.sqWR > 0 {
		sqWR = s.sqWR
	}
	return verbs.ConnOptions{PD: s.pd, SendCQ: s.scq, RecvCQ: s.rcq, PrivateData: pd, MaxSendWR: sqWR, MaxRecvWR: 64}
}

// pair connects a dialing client to an accepting server.
func pair(t testing.TB, cfg Config, addr string) (cli, srv *side) {
	t.Helper()
	p := New(cfg)
	cli, srv = newSide(t, p), newSide(t, p)
	connectSides(t, cli, srv, addr)
	return cli, srv
}

// connectSides connects cli (dialing) to srv (accepting) on addr.
func connectSides(t testing.TB, cli, srv *side, addr string) {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := srv.dev.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   verbs.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		req, err := ln.Accept(context.Background())
		if err != nil {
			ch <- res{nil, err}
			return
		}
		c, err := req.Accept(srv.opts([]byte("server-pd")))
		ch <- res{c, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := cli.dev.Dial(ctx, ln.Addr().String(), cli.opts([]byte("client-pd")))
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	cli.conn, srv.conn = c, r.c
}

func (s *side) mem(t testing.TB, n int, acc verbs.Access) verbs.MR {
	t.Helper()
	m, err := verbs.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := s.pd.Register(m.Bytes()[:n], acc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Deregister(); m.Free() })
	return mr
}

const allAccess = verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite

// wait returns the next completion on cq.
func wait(t testing.TB, cq verbs.CQ) verbs.WC {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wc [1]verbs.WC
	for {
		if cq.Poll(wc[:]) == 1 {
			return wc[0]
		}
		if err := cq.Wait(ctx); err != nil {
			t.Fatalf("waiting for a completion: %v", err)
		}
	}
}

func expectStatus(t testing.TB, wc verbs.WC, op verbs.Opcode, st verbs.Status) {
	t.Helper()
	if wc.Op != op || wc.Status != st {
		t.Fatalf("completion %+v: want %s with %s", wc, op, st)
	}
}

func waitDone(t testing.TB, c verbs.Conn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection did not end")
	}
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
}

func sameBytes(t testing.TB, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("data differs at byte %d of %d", i, len(want))
	}
}

func asTerminate(err error) *TerminateError {
	var te *TerminateError
	if errors.As(err, &te) {
		return te
	}
	return nil
}
