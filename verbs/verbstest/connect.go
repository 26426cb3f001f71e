package verbstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// rfc8797 is an RPC-over-RDMA CM private data block (RFC 8797): magic,
// version 1, flags, and 4 KiB inline sizes encoded as (bytes>>10)-1.
func rfc8797(flags byte) []byte {
	return []byte{0xf6, 0xab, 0x0e, 0x18, 1, flags, 3, 3}
}

// testConnectPrivateData carries private data both ways: what the dialer
// sends shows up in the ConnRequest and the server's Conn, what the
// acceptor sends shows up in the client's Conn. 56 bytes is the most an
// InfiniBand CM REQ carries through librdmacm.
func testConnectPrivateData(t *testing.T, c config) {
	for _, tc := range []struct {
		name     string
		req, rep []byte
	}{
		{"None", nil, nil},
		{"RFC8797", rfc8797(1), rfc8797(0)},
		{"Max56", pattern(56, 56), pattern(56, 57)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, c)
			p := e.connect(t,
				func(o *verbs.ConnOptions) { o.PrivateData = tc.req },
				func(o *verbs.ConnOptions) { o.PrivateData = tc.rep })
			padded := c.Quirks.PrivateDataPadded
			if !paddedEqual(p.srvPD, tc.req, padded) {
				t.Errorf("ConnRequest.PrivateData = % x, want % x", p.srvPD, tc.req)
			}
			if got := p.srv.conn.PrivateData(); !paddedEqual(got, tc.req, padded) {
				t.Errorf("server Conn.PrivateData = % x, want % x", got, tc.req)
			}
			if got := p.cli.conn.PrivateData(); !paddedEqual(got, tc.rep, padded) {
				t.Errorf("client Conn.PrivateData = % x, want % x", got, tc.rep)
			}
		})
	}
}

// testConnectAddresses checks that each end's view of the addresses
// matches the other's and the listener's.
func testConnectAddresses(t *testing.T, c config) {
	e := newEnv(t, c)
	ln := e.listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	scq, ccq := e.srv.cq(t, cqDepth), e.cli.cq(t, cqDepth)
	var reqRemote, reqLocal string
	acc := acceptOne(ctx, ln, func(req verbs.ConnRequest) (verbs.Conn, error) {
		if req.RemoteAddr() != nil {
			reqRemote = req.RemoteAddr().String()
		}
		if req.LocalAddr() != nil {
			reqLocal = req.LocalAddr().String()
		}
		return req.Accept(e.options(e.srv, scq, scq))
	})
	conn, err := e.cli.dev.Dial(ctx, ln.Addr().String(), e.options(e.cli, ccq, ccq))
	if err != nil {
		<-acc
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	a := <-acc
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { _ = a.conn.Close() })
	for _, x := range []struct {
		what      string
		got, want string
	}{
		{"client RemoteAddr vs listener Addr", str(conn.RemoteAddr()), ln.Addr().String()},
		{"server LocalAddr vs listener Addr", str(a.conn.LocalAddr()), ln.Addr().String()},
		{"server RemoteAddr vs client LocalAddr", str(a.conn.RemoteAddr()), str(conn.LocalAddr())},
		{"ConnRequest.RemoteAddr vs client LocalAddr", reqRemote, str(conn.LocalAddr())},
		{"ConnRequest.LocalAddr vs listener Addr", reqLocal, ln.Addr().String()},
	} {
		if x.got == "" || x.got != x.want {
			t.Errorf("%s: %q, want %q", x.what, x.got, x.want)
		}
	}
}

func str(a interface{ String() string }) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// testReject refuses a request with private data: Dial returns a
// *verbs.RejectError carrying it, which matches verbs.ErrRejected.
func testReject(t *testing.T, c config) {
	e := newEnv(t, c)
	ln := e.listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	why := []byte("rdmagw: busy, try later")
	acc := acceptOne(ctx, ln, func(req verbs.ConnRequest) (verbs.Conn, error) {
		return nil, req.Reject(why)
	})
	cq := e.cli.cq(t, cqDepth)
	conn, err := e.cli.dev.Dial(ctx, ln.Addr().String(), e.options(e.cli, cq, cq))
	if a := <-acc; a.err != nil {
		t.Errorf("Reject: %v", a.err)
	}
	if err == nil {
		_ = conn.Close()
		t.Fatal("Dial succeeded against a listener that rejected it")
	}
	var rej *verbs.RejectError
	if !errors.As(err, &rej) {
		t.Fatalf("Dial error %v (%T) is not a *verbs.RejectError", err, err)
	}
	if !errors.Is(err, verbs.ErrRejected) {
		t.Errorf("Dial error %v does not match verbs.ErrRejected", err)
	}
	if !paddedEqual(rej.PrivateData, why, c.Quirks.PrivateDataPadded) {
		t.Errorf("RejectError.PrivateData = %q, want %q", rej.PrivateData, why)
	}
}

// testDialClosedPort dials a port whose listener has closed: an error,
// not a hang and not a connection.
func testDialClosedPort(t *testing.T, c config) {
	e := newEnv(t, c)
	ln, err := e.srv.dev.Listen(c.Addr)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Errorf("Listener.Close: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	cq := e.cli.cq(t, cqDepth)
	conn, err := e.cli.dev.Dial(ctx, addr, e.options(e.cli, cq, cq))
	if err == nil {
		_ = conn.Close()
		t.Fatalf("Dial(%s) to a closed listener succeeded", addr)
	}
	if ctx.Err() != nil {
		t.Fatalf("Dial(%s) to a closed listener only failed at the deadline: %v", addr, err)
	}
	t.Logf("Dial to closed port: %v", err)
}

// testDialContextDeadline dials a listener that never answers: Dial must
// give up when its context ends.
func testDialContextDeadline(t *testing.T, c config) {
	e := newEnv(t, c)
	ln := e.listen(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cq := e.cli.cq(t, cqDepth)
	start := time.Now()
	conn, err := e.cli.dev.Dial(ctx, ln.Addr().String(), e.options(e.cli, cq, cq))
	took := time.Since(start)
	if err == nil {
		_ = conn.Close()
		t.Fatal("Dial succeeded without the listener accepting")
	}
	if took > 300*time.Millisecond+c.Timeout/4 && !c.Quirks.SlowDialAbort {
		t.Errorf("Dial took %v to notice its context ended", took)
	}
	t.Logf("Dial with deadline: %v after %v", err, took)
}

// testAcceptContextCancel: Accept without a dialer returns when its
// context is cancelled, and after the listener is closed.
func testAcceptContextCancel(t *testing.T, c config) {
	e := newEnv(t, c)
	ln := e.listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := ln.Accept(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Accept after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(c.Timeout):
		t.Fatal("Accept did not return after its context was cancelled")
	}
	go func() {
		_, err := ln.Accept(context.Background())
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = ln.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Accept on a closed listener returned no error")
		}
	case <-time.After(c.Timeout):
		t.Fatal("Accept did not return after the listener closed")
	}
}
