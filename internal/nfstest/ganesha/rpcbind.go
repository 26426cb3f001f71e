package ganesha

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

const rpcbindSock = "/run/rpcbind.sock"

// ensureRPCBind makes sure an rpcbind answers on its Unix socket, where
// ganesha registers. When none does it starts one in an empty network
// namespace, so its port 111 reaches nobody while ganesha still registers
// through the socket file. That rpcbind is started as a daemon of its own
// (new session, no parent-death signal; rpcbind drops to its own user,
// which would clear such a signal anyway) and stays up after the test
// binary exits, as the system's rpcbind would: a test binary that stops
// the rpcbind it started would pull it from under a ganesha that another
// package's tests are starting at that moment. Callers hold the start
// lock, so two test binaries never both start one.
func ensureRPCBind(t testing.TB) {
	t.Helper()
	if sockUp() {
		return
	}
	unshare, err1 := exec.LookPath("unshare")
	rpcbind, err2 := exec.LookPath("rpcbind")
	if err1 != nil || err2 != nil {
		t.Skip("rpcbind is not running on " + rpcbindSock + " and cannot be started (apt-get install rpcbind util-linux)")
	}
	cmd := exec.Command(unshare, "-n", rpcbind, "-f")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Skipf("start rpcbind: %v", err)
	}
	go func() { _ = cmd.Wait() }()
	for range 50 {
		if sockUp() {
			t.Logf("started rpcbind (pid %d) in an empty network namespace for ganesha's registrations", cmd.Process.Pid)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Skipf("rpcbind did not come up on %s: %s", rpcbindSock, out.String())
}

func sockUp() bool {
	c, err := net.DialTimeout("unix", rpcbindSock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// lock takes the exclusive start lock (LockPath), waiting for it, and
// returns its release.
func lock(t testing.TB) func() {
	t.Helper()
	f, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("ganesha start lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("ganesha start lock %s: %v", LockPath, err)
	}
	return func() { f.Close() } // closing the file releases the lock
}

// FreePorts returns n distinct loopback ports that were free a moment
// ago, for TCP and, with udp, for UDP as well.
func FreePorts(t testing.TB, n int, udp bool) []int {
	t.Helper()
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closers = append(closers, l.Close)
		p := l.Addr().(*net.TCPAddr).Port
		if udp {
			u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue // taken on UDP: keep the TCP one held, try another
			}
			closers = append(closers, u.Close)
		}
		ports = append(ports, p)
	}
	return ports
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
