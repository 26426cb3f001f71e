package rdmarpc

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// engineGoroutines counts the goroutines running engine code of package
// rdmarpc (not tests, not the toy handler, not the provider).
func engineGoroutines() (n int, stacks string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var kept []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "rdmagw/rdmarpc.") || strings.Contains(g, "rdmarpc.Test") ||
			strings.Contains(g, "toyHandler") || strings.Contains(g, "rawClient") {
			continue
		}
		// Only goroutines whose running frames (not just their creator)
		// are engine code.
		frames := g
		if i := strings.Index(g, "\ncreated by "); i >= 0 {
			frames = g[:i]
		}
		if strings.Contains(frames, "rdmagw/rdmarpc.") {
			n++
			kept = append(kept, g)
		}
	}
	return n, strings.Join(kept, "\n\n")
}

// One forward connection (a ResponderConn) costs its Serve goroutine and
// one watch of the queue pair's end; one RequesterConn its completion
// loop and the same watch. The bridges between the connection's own
// channels and the wait context are context.AfterFunc registrations, no
// goroutines (before the endpoint skeleton: 3 and 3).
func TestEngineGoroutines(t *testing.T) {
	if n, st := engineGoroutines(); n != 0 {
		t.Fatalf("%d engine goroutines before the test:\n%s", n, st)
	}
	p := newEnginePair(t, pairOpts{})
	// Both loops are parked once a call has round-tripped.
	r, err := p.call(readCallMsg(1, 100), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	const want = 4 // Serve + watch, loop + watch
	var n int
	var st string
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, st = engineGoroutines()
		if n >= want && strings.Contains(st, "(*ResponderConn).Serve") && strings.Contains(st, "(*RequesterConn).loop") {
			time.Sleep(50 * time.Millisecond) // let any bridge goroutine start
			n, st = engineGoroutines()
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n != want {
		t.Errorf("%d engine goroutines for one responder and one requester, want %d:\n%s", n, want, st)
	}
	p.close()
	waitFor(t, 5*time.Second, "engine goroutines to end", func() bool { n, _ := engineGoroutines(); return n == 0 })
}

// The provider's reason a queue pair ended reaches the engine's error
// wrapped, not flattened: errors.As finds an iWARP Terminate through
// ResponderConn.Err (Serve's result) and RequesterConn.Err.
func TestEngineErrorWrapsProviderError(t *testing.T) {
	t.Run("responder", func(t *testing.T) {
		p := newEnginePair(t, pairOpts{noRequester: true})
		c := dialRaw(t, p.rawAddr, linuxPrivateData)
		if err := <-p.accepted; err != nil {
			t.Fatal(err)
		}
		// An RDMA Write to an STag the responder never advertised: its
		// provider answers with a Terminate and ends the queue pair.
		src := c.mem.Bytes()[rawDataOff : rawDataOff+64]
		if err := c.conn.PostSend(&verbs.SendWR{ID: 9, Op: verbs.OpRDMAWrite, RemoteAddr: 0x1000, RKey: 0x5a5a5a00,
			SGL: []verbs.SGE{{Buf: src, LKey: c.mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-p.served:
		case <-time.After(10 * time.Second):
			t.Fatal("the responder survived a Write to a bad STag")
		}
		var te *iwarp.TerminateError
		if !errors.As(err, &te) || !errors.Is(err, ErrConnClosed) {
			t.Fatalf("Serve returned %v (%T): no *iwarp.TerminateError in it", err, err)
		}
		if !errors.As(p.resp.Err(), &te) {
			t.Fatalf("Err() = %v", p.resp.Err())
		}
		t.Logf("Serve: %v", err)
	})
	t.Run("requester", func(t *testing.T) {
		p := newEnginePair(t, pairOpts{})
		b, err := p.srv.pool.Get(64)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		// The same from the responder's queue pair towards the requester.
		if err := p.resp.qp.PostSend(&verbs.SendWR{ID: wrWrite, Op: verbs.OpRDMAWrite, RemoteAddr: 0x1000,
			RKey: 0x5a5a5a00, SGL: []verbs.SGE{b.SGE(0, 64)}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.req.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the requester survived a Write to a bad STag")
		}
		err = p.req.Err()
		var te *iwarp.TerminateError
		if !errors.As(err, &te) || !errors.Is(err, ErrConnClosed) {
			t.Fatalf("Err() = %v (%T): no *iwarp.TerminateError in it", err, err)
		}
		t.Logf("requester: %v", err)
	})
}
