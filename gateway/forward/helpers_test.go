package forward_test

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/tcprpc"
)

// startGateway runs a forward gateway on the pure-Go iWARP provider on a
// free loopback port, in front of backend ("host:port").
func startGateway(t testing.TB, backend string, tweak func(*gateway.Config)) *forward.Gateway {
	t.Helper()
	return startGatewayLog(t, backend, tweak, io.Discard)
}

// startGatewayLog is startGateway with the gateway's log also written to
// logs (at debug unless tweak says otherwise).
func startGatewayLog(t testing.TB, backend string, tweak func(*gateway.Config), logs io.Writer) *forward.Gateway {
	t.Helper()
	return forwardtest.StartWith(t, backend, func(c *gateway.Config) {
		c.Log.Level = "debug"
		if tweak != nil {
			tweak(c)
		}
	}, io.MultiWriter(gwtest.TestLog(t), logs))
}

// tcpServer is a test's TCP server on a free loopback port: it hands
// each accepted connection to handle, on the accepting goroutine
// (handle starts one of its own to serve it); at the test's end it
// closes the listener and every connection it accepted.
type tcpServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startTCPServer(t testing.TB, handle func(c net.Conn)) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			handle(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	return s
}

func (s *tcpServer) addr() string { return s.ln.Addr().String() }

// proxy sits between the gateway and the NFS server so a test can break
// the backend connection, hold or swallow replies, and inject bogus ones.
// Calls pass byte for byte; replies are re-framed record by record.
type proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    []net.Conn
	srcPorts []int
	closed   bool

	// hold: replies are read from the server but not forwarded.
	hold atomic.Bool
	// cutOnReply: the next reply is swallowed and both connections closed.
	cutOnReply atomic.Bool
	// injectUnknown: before the next reply, send one with an XID no call has.
	injectUnknown atomic.Bool
	accepted      atomic.Int32

	// gate, while closed (pause), keeps replies back, in order, until it
	// opens again (ops_test.go): a slow backend.
	gateMu sync.Mutex
	gate   chan struct{} // nil or closed: open

	// tricklePiece > 0: replies go on in writes of that many bytes with
	// tricklePause after each, as from a backend slower than the gateway
	// (cutthrough_test.go): the gateway's reads come back short.
	tricklePiece atomic.Int64
	tricklePause atomic.Int64 // nanoseconds
}

// trickler is the reply side's writer: whole writes, or pieces with a
// pause after each while the proxy trickles.
type trickler struct {
	p *proxy
	c net.Conn
}

func (w trickler) Write(b []byte) (int, error) {
	piece, pause := int(w.p.tricklePiece.Load()), time.Duration(w.p.tricklePause.Load())
	if piece <= 0 {
		return w.c.Write(b)
	}
	n := 0
	for n < len(b) {
		m, err := w.c.Write(b[n:min(n+piece, len(b))])
		n += m
		if err != nil {
			return n, err
		}
		time.Sleep(pause)
	}
	return n, nil
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, target: target}
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.srcPorts = append(p.srcPorts, c.RemoteAddr().(*net.TCPAddr).Port)
		p.mu.Unlock()
		p.accepted.Add(1)
		go func() {
			io.Copy(s, c)
			s.Close()
			c.Close()
		}()
		go p.replies(s, c)
	}
}

// replies forwards server records to the gateway, applying the test's
// mischief.
func (p *proxy) replies(s, c net.Conn) {
	defer c.Close()
	defer s.Close()
	rr := tcprpc.NewRecordReader(s, nil)
	rw := tcprpc.NewRecordWriter(trickler{p, c}, nil)
	var buf []byte
	for {
		rec, err := rr.ReadRecord(buf[:0])
		if err != nil {
			return
		}
		buf = rec
		if p.cutOnReply.CompareAndSwap(true, false) {
			return
		}
		if p.hold.Load() {
			continue
		}
		p.waitGate()
		if p.injectUnknown.CompareAndSwap(true, false) {
			bogus := append([]byte(nil), rec...)
			bogus[0] ^= 0x5a // another XID, same shape
			bogus[3] ^= 0xa5
			if rw.WriteRecord(bogus, nil, nil) != nil {
				return
			}
		}
		if rw.WriteRecord(rec, nil, nil) != nil {
			return
		}
	}
}

// cut closes every connection through the proxy (the listener stays).
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// ports returns the gateway-side source ports of the connections seen.
func (p *proxy) ports() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.srcPorts...)
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.cut()
}
