package tcprelay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

var modes = []Mode{ModeNetpoll, ModeEpoll}

func start(t *testing.T, mode Mode, backend string, workers int) *Relay {
	t.Helper()
	r, err := Start(context.Background(), Config{Mode: mode, Listen: "127.0.0.1:0", Backend: backend, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// echoServer echoes every connection until it closes.
func echoServer(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln
}

// TestEchoBackpressure relays 16 MiB both ways through an echo server
// while the client reads only after a pause: both directions fill the
// sockets, so the epoll relay's EAGAIN path (data kept, EPOLLOUT) runs,
// and every byte must come back in order. (The relays do not carry a
// half-close: the client reads the echo whole before it closes.) Two connections at once, on
// two workers.
func TestEchoBackpressure(t *testing.T) {
	echo := echoServer(t)
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			r := start(t, mode, echo.Addr().String(), 2)
			done := make(chan error, 2)
			for i := range 2 {
				go func() { done <- echoOnce(r.Addr().String(), nfstest.Pattern(16<<20, uint64(i))) }()
			}
			for range 2 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func echoOnce(addr string, data []byte) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		werr <- err
	}()
	time.Sleep(200 * time.Millisecond)
	got := make([]byte, len(data))
	if n, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("echo: %d bytes back of %d: %w", n, len(data), err)
	}
	if err := <-werr; err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return &mismatch{len(got), len(data)}
	}
	return nil
}

type mismatch struct{ got, want int }

func (m *mismatch) Error() string {
	return fmt.Sprintf("echo: %d bytes back of %d sent, not the same", m.got, m.want)
}

// TestGanesha writes 8 MiB to nfs-ganesha through each relay in NFSv3
// WRITEs (three in flight), reads it back through the relay and compares
// it byte for byte.
func TestGanesha(t *testing.T) {
	g := nfstest.StartGanesha(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	root := nfstest.MountRoot(t, ctx, g.MountAddr, g.Export)
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			r := start(t, mode, g.NFSAddr, 2)
			tr, err := nfsclient.DialTCP(ctx, r.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			v3 := &nfsclient.V3{T: tr}
			nfstest.V3RoundTrip(t, ctx, v3, root, "relay-"+string(mode), 8<<20+3, nfsproto.FileSync, g.Dir)
		})
	}
}

// TestCloseEndsConnections: Close returns with a relayed connection
// open, and the client then sees its connection end.
func TestCloseEndsConnections(t *testing.T) {
	echo := echoServer(t)
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			r, err := Start(context.Background(), Config{Mode: mode, Listen: "127.0.0.1:0", Backend: echo.Addr().String(), Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			c, err := net.Dial("tcp", r.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			buf := []byte("ping")
			if _, err := c.Write(buf); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("echo %q, %v", buf, err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(buf); err == nil {
				t.Fatalf("read %d bytes after Close, want the connection ended", n)
			}
		})
	}
}

func TestBadMode(t *testing.T) {
	if _, err := Start(context.Background(), Config{Mode: "splice", Listen: "127.0.0.1:0", Backend: "127.0.0.1:1"}); err == nil {
		t.Fatal("mode splice accepted")
	}
}
