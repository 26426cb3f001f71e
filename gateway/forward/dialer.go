package forward

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// backendDialer opens TCP connections to the NFS server. After the first
// connection it tries to reconnect from the same local port: servers key
// their duplicate request cache (and NFSv3 client identity) on the
// client's address and port, so a retransmission from the same port finds
// the cached reply of a non-idempotent call that did execute. Where the
// OS refuses the port (the old connection still in TIME_WAIT towards the
// same server), it falls back to any port.
type backendDialer struct {
	addr      string
	timeout   time.Duration
	reserved  bool // bind a port below 1024
	lastLocal *net.TCPAddr
	// samePort reports whether the last dial kept the previous local port;
	// portErr is why it could not (nil after the first dial).
	samePort bool
	portErr  error
	// last is the latest connection's local and remote address, for the
	// live view (read by other goroutines).
	last atomic.Pointer[[2]string]
}

// Reserved ports are tried from the top down, as bindresvport does;
// below 600 lie well-known services.
const (
	reservedPortHigh = 1023
	reservedPortLow  = 600
)

func (d *backendDialer) dial(ctx context.Context) (*net.TCPConn, error) {
	d.samePort, d.portErr = false, nil
	if d.lastLocal != nil {
		c, err := d.dialFrom(ctx, d.lastLocal.Port)
		if err == nil {
			d.samePort = true
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		d.portErr = err
	}
	if !d.reserved {
		return d.dialFrom(ctx, 0)
	}
	var last error
	for port := reservedPortHigh; port >= reservedPortLow; port-- {
		c, err := d.dialFrom(ctx, port)
		if err == nil {
			return c, nil
		}
		last = err
		if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("backend %s: no free reserved source port: %w", d.addr, last)
}

// dialFrom connects from local port port (0: any) with SO_REUSEADDR, which
// lets a port whose previous connection is in TIME_WAIT be bound again.
func (d *backendDialer) dialFrom(ctx context.Context, port int) (*net.TCPConn, error) {
	nd := net.Dialer{Timeout: d.timeout, Control: setReuseAddr}
	if port != 0 {
		nd.LocalAddr = &net.TCPAddr{Port: port}
		if d.lastLocal != nil {
			nd.LocalAddr = &net.TCPAddr{IP: d.lastLocal.IP, Port: port}
		}
	}
	c, err := nd.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, fmt.Errorf("backend %s: connect: %w", d.addr, err)
	}
	tc := c.(*net.TCPConn)
	if la, ok := tc.LocalAddr().(*net.TCPAddr); ok {
		d.lastLocal = la
	}
	d.last.Store(&[2]string{tc.LocalAddr().String(), tc.RemoteAddr().String()})
	return tc, nil
}

func setReuseAddr(network, address string, rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
