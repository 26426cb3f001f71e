package modetest_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/reverse/reversetest"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// tcpRelay relays bytes between the reverse gateway and the forward
// gateway (the pure-Go iWARP provider runs over TCP), so a test can make
// the RDMA connection a black hole (connected, nothing gets through) or
// cut it.
type tcpRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	pairs  []*relayPair
	wg     sync.WaitGroup
}

type relayPair struct {
	a, b net.Conn
	hole atomic.Bool // discard what arrives, both ways
}

func startRelay(t *testing.T, target string) *tcpRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln, target: target}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			p := &relayPair{a: a, b: b}
			r.mu.Lock()
			r.pairs = append(r.pairs, p)
			r.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				defer r.wg.Done()
				buf := make([]byte, 64<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !p.hole.Load() {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				a.Close()
				b.Close()
			}
			r.wg.Add(2)
			go pipe(a, b)
			go pipe(b, a)
		}
	}()
	t.Cleanup(func() { r.cut(); ln.Close(); r.wg.Wait() })
	return r
}

// blackHole makes every current connection swallow everything.
func (r *tcpRelay) blackHole() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pairs {
		p.hole.Store(true)
	}
}

// cut closes every current connection.
func (r *tcpRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pairs {
		p.a.Close()
		p.b.Close()
	}
	r.pairs = nil
}

// The host chain with real peers, its RDMA hop first hung, then cut:
// the reverse gateway's pings find the hung connection, it reconnects
// and re-sends the calls in flight with their XIDs; ganesha's data comes
// back byte for byte.
func TestReverseChainBackendHungAndCut(t *testing.T) {
	g := nfstest.StartGanesha(t)
	fwd := forwardtest.Start(t, g.NFSAddr)
	relay := startRelay(t, fwd.Addr().String())
	rev := reversetest.StartWith(t, relay.ln.Addr().String(), func(c *gateway.Config) {
		c.Log.Level, c.Log.Format = "debug", "json"
		c.Pool.MaxBytes = 64 << 20
		c.Reverse.PingInterval, c.Reverse.PingTimeout = 200*time.Millisecond, 300*time.Millisecond
		c.Backend.ReconnectInitial, c.Backend.ReconnectMax = 50*time.Millisecond, 200*time.Millisecond
		c.Backend.GiveUpAfter = 10 * time.Second
	}, gwtest.TestLog(t))
	ctx := nfstest.Ctx(t)
	root := nfstest.MountRoot(t, ctx, g.MountAddr, g.Export)
	nt, err := nfsclient.DialTCP(ctx, rev.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	c := &nfsclient.V3{T: nt}
	fh, err := c.Create(ctx, root, "hung", nfsproto.CreateUnchecked, nfsproto.Sattr3{SetMode: true, Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	want := nfstest.Pattern(1<<20, 11)
	if _, err := c.Write(ctx, fh, 0, want[:512<<10], nfsproto.FileSync); err != nil {
		t.Fatal(err)
	}

	// 1. Hung: the RDMA connection stays up, nothing gets through. A
	// WRITE and a READ issued now complete once the gateway has found
	// out and reconnected.
	relay.blackHole()
	readBack := func(off uint64, n uint32) []byte {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got, _, err := c.Read(cctx, fh, off, n)
		if err != nil {
			t.Fatalf("READ at %d: %v", off, err)
		}
		return got
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if _, err := c.Write(wctx, fh, 512<<10, want[512<<10:], nfsproto.FileSync); err != nil {
		t.Fatalf("WRITE across the hung connection: %v", err)
	}
	cancel()
	if got := readBack(0, 1<<20); !bytes.Equal(got, want) {
		t.Fatalf("READ after the hang differs at %d", nfstest.FirstDiff(got, want))
	}
	if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_backend_pings_total", "result", "timeout"); n < 1 {
		t.Errorf("ping timeouts = %v", n)
	}

	// 2. Cut: both TCP connections under the RDMA connection close.
	relay.cut()
	if got := readBack(256<<10, 256<<10); !bytes.Equal(got, want[256<<10:512<<10]) {
		t.Fatal("READ after the cut returned wrong data")
	}
	if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_backend_reconnects_total"); n < 2 {
		t.Errorf("reconnects = %v, want 2", n)
	}
	disk, err := os.ReadFile(filepath.Join(g.Dir, "hung"))
	if err != nil || !bytes.Equal(disk, want) {
		t.Fatalf("the file on ganesha's disk: %d bytes, differs at %d (%v)", len(disk), nfstest.FirstDiff(disk, want), err)
	}
	if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_backend_errors_total", "where", "lost"); n < 2 {
		t.Errorf("RDMA connections lost = %v, want 2", n)
	}
}
