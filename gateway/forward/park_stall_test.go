package forward_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/ulb"
)

// stallRelay is a TCP relay to the NFS server whose call direction can
// be stopped: while stalled it reads nothing from the gateway, so the
// gateway's writes block once the socket buffers are full (a slow
// server, or lab case 21-drc-reconnect's netem delay).
type stallRelay struct {
	ln      net.Listener
	target  string
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
	dials   atomic.Int32
	moved   atomic.Int64 // call bytes relayed
}

func startStallRelay(t *testing.T, target string) *stallRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &stallRelay{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.dials.Add(1)
			r.mu.Lock()
			r.conns = append(r.conns, c, s)
			r.mu.Unlock()
			go func() { // calls, stoppable
				buf := make([]byte, 64<<10)
				for {
					for r.stalled.Load() {
						time.Sleep(5 * time.Millisecond)
					}
					n, err := c.Read(buf)
					if n > 0 {
						if _, werr := s.Write(buf[:n]); werr != nil {
							return
						}
						r.moved.Add(int64(n))
					}
					if err != nil {
						s.Close()
						return
					}
				}
			}()
			go func() { io.Copy(c, s); c.Close() }() // replies
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
	})
	return r
}

// A client that disconnects while the gateway is in the middle of
// writing one of its calls to a slow server (the writer blocked on a
// full socket) still has its backend connection kept: parking lets the
// record finish instead of cutting it, so the reconnect finds the same
// connection (and the server's duplicate request cache its entries).
// Lab case 21-drc-reconnect failed so: a session parked while its
// writer was blocked, "a record was cut by the pause", and the
// reconnect got a new backend connection.
func TestForwardParkWaitsForCallBeingWritten(t *testing.T) {
	g := nfstest.StartGanesha(t)
	rl := startStallRelay(t, g.NFSAddr)
	gw := startGateway(t, rl.ln.Addr().String(), nil)
	m := gw.Metrics()
	root := mount3(t, g.MountAddr, g.Export)
	c1 := dialRDMA(t, gw.Addr().String())
	n := &nfs3{c: c1, t: t}
	fh := n.create(root, "slow")

	rl.stalled.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	data := nfstest.Pattern(1<<20, 7)
	for i := range 12 { // 12 MiB: more than the sockets buffer
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := new(enc).opaque(fh).u64(uint64(i) << 20).u32(1 << 20).u32(0).u32(1 << 20).b
			c1.call(ctx, ulb.ProgNFS, 3, nfs3Write, args, data, nil)
		}()
	}
	// Wait until the gateway's writes stall: the relay moves nothing
	// while the calls are with the gateway.
	gwtest.WaitFor(t, 20*time.Second, "the calls to reach the gateway", func() bool {
		return gwtest.Metric(t, m, "rdmagw_calls_total", "procedure", "WRITE") >= 12
	})
	time.Sleep(200 * time.Millisecond) // the writer is in a writev that cannot finish
	cancel()
	c1.close()
	wg.Wait()
	time.Sleep(300 * time.Millisecond)
	rl.stalled.Store(false) // the server reads again: the record finishes
	gwtest.WaitFor(t, 20*time.Second, "the backend connection to be parked", func() bool {
		return gwtest.Metric(t, m, "rdmagw_backend_connections_parked") == 1
	})
	c2 := dialRDMA(t, gw.Addr().String())
	if err := null3(c2, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if v := gwtest.Metric(t, m, "rdmagw_backend_connections_kept_total"); v != 1 {
		t.Errorf("backend connections kept = %v, want 1", v)
	}
	if d := rl.dials.Load(); d != 1 {
		t.Errorf("backend connections dialed = %d, want 1: kept across the reconnect", d)
	}
}
