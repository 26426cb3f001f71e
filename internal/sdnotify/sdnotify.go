// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)): readiness, status lines, stopping and reloading, and the
// watchdog keep-alive, as datagrams on the Unix socket named by
// $NOTIFY_SOCKET.
//
// It is the few lines of the protocol rather than coreos/go-systemd's
// daemon package: the protocol is a stable, documented ABI of a dozen
// lines (one datagram of newline-separated KEY=VALUE assignments to a
// path or abstract socket; WATCHDOG_USEC/WATCHDOG_PID in the environment),
// the project takes on no module for it, and the watchdog loop here runs a
// liveness probe before each ping, which go-systemd leaves to its caller
// anyway.
//
// Files:
//
//	sdnotify.go   Notifier: Send and the state helpers, WatchdogInterval
//	watchdog.go   RunWatchdog: pings gated by a liveness probe
package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Notifier sends notifications to the service manager. The zero of
// *Notifier (nil) is valid and sends nothing: a gateway started outside
// systemd (or with Type=exec) runs the same code.
type Notifier struct {
	mu     sync.Mutex // one notification at a time, in order
	addr   *net.UnixAddr
	closed bool
}

// FromEnv returns a Notifier for $NOTIFY_SOCKET, or nil when it is unset.
// A name starting with '@' is an abstract socket (Linux).
func FromEnv() (*Notifier, error) {
	name := os.Getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil, nil
	}
	return New(name)
}

// New returns a Notifier for the socket name (a path, or '@' + an
// abstract name).
func New(name string) (*Notifier, error) {
	switch {
	case strings.HasPrefix(name, "/"), strings.HasPrefix(name, "@"):
	default:
		// vsock: addresses (systemd 253+, for VMs) are not supported.
		return nil, fmt.Errorf("sdnotify: NOTIFY_SOCKET %q: not a path or an abstract socket name", name)
	}
	// Go maps a leading '@' to the abstract namespace itself.
	return &Notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}, nil
}

// Send sends one notification: KEY=VALUE lines (sd_notify(3)).
func (n *Notifier) Send(lines ...string) error {
	if n == nil {
		return nil
	}
	msg := strings.Join(lines, "\n")
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("sdnotify: closed")
	}
	// A socket per message, as sd_notify does: the manager's socket may
	// be re-created (daemon-reexec) while the service runs.
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(msg)); err != nil {
		return fmt.Errorf("sdnotify: send %q: %w", msg, err)
	}
	return nil
}

// Ready reports start-up finished (READY=1).
func (n *Notifier) Ready() error { return n.Send("READY=1") }

// Stopping reports that the service is shutting down (STOPPING=1).
func (n *Notifier) Stopping() error { return n.Send("STOPPING=1") }

// Status sets the free-form status line "systemctl status" shows.
func (n *Notifier) Status(s string) error {
	return n.Send("STATUS=" + strings.ReplaceAll(s, "\n", " "))
}

// Reloading reports a configuration reload starting (RELOADING=1 with
// the CLOCK_MONOTONIC time systemd 253+ wants); send Ready when done.
func (n *Notifier) Reloading() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return n.Send("RELOADING=1")
	}
	return n.Send("RELOADING=1", fmt.Sprintf("MONOTONIC_USEC=%d", ts.Nano()/1000))
}

// Watchdog is one keep-alive ping (WATCHDOG=1).
func (n *Notifier) Watchdog() error { return n.Send("WATCHDOG=1") }

// Close stops sending: later notifications fail.
func (n *Notifier) Close() error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	return nil
}

// WatchdogInterval returns the watchdog timeout systemd set for this
// process ($WATCHDOG_USEC, WatchdogSec=), or 0 when there is none: unset,
// unparsable, or meant for another process ($WATCHDOG_PID).
func WatchdogInterval() time.Duration {
	usec := os.Getenv("WATCHDOG_USEC")
	if usec == "" {
		return 0
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != fmt.Sprint(os.Getpid()) {
		return 0
	}
	var n int64
	if _, err := fmt.Sscanf(usec, "%d", &n); err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Microsecond
}
