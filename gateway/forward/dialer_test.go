package forward

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// The dialer reconnects from its previous local port; when another socket
// on this host holds that port it falls back to any port and says why, so
// the session can count and log the change (the server's duplicate request
// cache will not recognise the calls it sends again).
func TestDialerKeepsPortOrSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close() // the server closes first: no TIME_WAIT on the dialer's side
		}
	}()
	d := &backendDialer{addr: ln.Addr().String(), timeout: 5 * time.Second}
	ctx := context.Background()
	port := func(c *net.TCPConn) int { return c.LocalAddr().(*net.TCPAddr).Port }
	// closed waits for the server's FIN, then closes our side.
	closed := func(c *net.TCPConn) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("server sent data")
		}
		c.Close()
	}

	c1, err := d.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.samePort || d.portErr != nil {
		t.Fatalf("first dial: samePort %v, portErr %v; want false, nil", d.samePort, d.portErr)
	}
	p1 := port(c1)
	closed(c1)

	c2, err := d.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case d.samePort && port(c2) == p1 && d.portErr == nil:
	case !d.samePort && PortHeldElsewhere(t, p1):
		// Another socket holds the port (see TestForwardBackendReconnect).
		t.Logf("second dial from port %d: %d is held elsewhere (%v)", port(c2), p1, d.portErr)
	default:
		t.Fatalf("second dial from port %d (samePort %v, portErr %v), first from %d: want the same port", port(c2), d.samePort, d.portErr, p1)
	}
	closed(c2)

	// A listener on the port: SO_REUSEADDR does not share a port with a
	// listening socket, so the dialer must fall back. The listener takes a
	// port of its own (bind to port 0 picks one no socket uses) and the
	// dialer is pointed at it as its previous port: c2's port cannot be
	// held reliably, because connect() shares an ephemeral port among
	// connections to different destinations, and this package's other
	// tests run beside this one (a CI run failed here with EADDRINUSE).
	lc := net.ListenConfig{Control: setReuseAddr}
	hold, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hold a port: %v", err)
	}
	defer hold.Close()
	p2 := hold.Addr().(*net.TCPAddr).Port
	d.lastLocal = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p2}
	c3, err := d.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if d.samePort || port(c3) == p2 {
		t.Fatalf("third dial: samePort %v from port %d while %d is held; want another port", d.samePort, port(c3), p2)
	}
	if !errors.Is(d.portErr, syscall.EADDRINUSE) {
		t.Fatalf("third dial: portErr %v, want EADDRINUSE", d.portErr)
	}
}

// PortHeldElsewhere reports whether binding 127.0.0.1:port with
// SO_REUSEADDR (as the gateway's dialer does) fails with EADDRINUSE now.
func PortHeldElsewhere(t *testing.T, port int) bool {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		t.Fatal(err)
	}
	return errors.Is(syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}), syscall.EADDRINUSE)
}
