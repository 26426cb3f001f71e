package tcprelay

// The relay's configuration, ModeNetpoll, and what both modes share.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
)

// Mode is a relay design.
type Mode string

const (
	ModeNetpoll Mode = "netpoll" // a goroutine per direction on Go's netpoller
	ModeEpoll   Mode = "epoll"   // run to completion on locked threads, one epoll each
)

// bufSize is the buffer of one direction of one connection.
const bufSize = 64 << 10

// Config is what a relay serves.
type Config struct {
	Mode    Mode
	Listen  string // host:port to listen on (TCP)
	Backend string // host:port every accepted connection is relayed to
	// Workers is the number of epoll threads (ModeEpoll); 0 means
	// runtime.GOMAXPROCS(0).
	Workers int
}

// Relay is a listening relay.
type Relay struct {
	addr  net.Addr
	close func() error
	done  chan error
}

// Start listens on cfg.Listen and relays every accepted connection to
// cfg.Backend until ctx ends or Close is called.
func Start(ctx context.Context, cfg Config) (*Relay, error) {
	switch cfg.Mode {
	case ModeNetpoll:
		return startNetpoll(ctx, cfg)
	case ModeEpoll:
		return startEpoll(ctx, cfg)
	}
	return nil, fmt.Errorf("tcprelay: mode %q: want %s or %s", cfg.Mode, ModeNetpoll, ModeEpoll)
}

// Addr is where the relay listens.
func (r *Relay) Addr() net.Addr { return r.addr }

// Close stops accepting, closes every relayed connection and waits for
// the relay's goroutines.
func (r *Relay) Close() error {
	err := r.close()
	if werr := <-r.done; werr != nil && err == nil {
		err = werr
	}
	r.done <- nil
	return err
}

// netpollRelay is ModeNetpoll's state: the connections open, for Close.
type netpollRelay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	once  sync.Once
}

// closeAll stops accepting and closes every relayed connection.
func (n *netpollRelay) closeAll() error {
	n.once.Do(func() {
		n.ln.Close()
		n.mu.Lock()
		for c := range n.conns {
			c.Close()
		}
		n.mu.Unlock()
	})
	return nil
}

func (n *netpollRelay) track(add bool, cs ...net.Conn) {
	n.mu.Lock()
	for _, c := range cs {
		if add {
			n.conns[c] = struct{}{}
		} else {
			delete(n.conns, c)
		}
	}
	n.mu.Unlock()
}

// startNetpoll is ModeNetpoll.
func startNetpoll(ctx context.Context, cfg Config) (*Relay, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("tcprelay: listen %s: %w", cfg.Listen, err)
	}
	n := &netpollRelay{ln: ln, conns: map[net.Conn]struct{}{}}
	r := &Relay{addr: ln.Addr(), close: n.closeAll, done: make(chan error, 1)}
	stop := context.AfterFunc(ctx, func() { n.closeAll() })
	go func() {
		defer stop()
		var wg sync.WaitGroup
		for {
			c, err := ln.Accept()
			if err != nil {
				break
			}
			wg.Go(func() { n.relay(c, cfg.Backend) })
		}
		n.closeAll()
		wg.Wait()
		r.done <- nil
	}()
	return r, nil
}

// relay connects c to the backend and copies both ways until either
// side ends.
func (n *netpollRelay) relay(c net.Conn, backend string) {
	b, err := net.Dial("tcp", backend)
	if err != nil {
		c.Close()
		return
	}
	n.track(true, c, b)
	var pair sync.WaitGroup
	pair.Go(func() { pipe(b, c) })
	pipe(c, b)
	pair.Wait()
	n.track(false, c, b)
}

// pipe copies from src to dst with Read and Write (not io.Copy, which
// would splice on Linux and measure the kernel instead of the
// goroutines), then closes both.
func pipe(src, dst net.Conn) {
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
}

// errClosed is returned by a worker stopped by Close.
var errClosed = errors.New("tcprelay: closed")

// workerCount is cfg.Workers or GOMAXPROCS.
func workerCount(cfg Config) int {
	if cfg.Workers > 0 {
		return cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}
