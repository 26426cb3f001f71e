package nfstest

import (
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

const rpcbindSock = "/run/rpcbind.sock"

// ensureRPCBind makes sure an rpcbind answers on its Unix socket: ganesha
// refuses to start unless it can register there. An rpcbind we start runs
// in an empty network namespace, so its port 111 reaches nobody while
// ganesha still registers through the socket file; it lives as long as
// the test binary.
func ensureRPCBind(t testing.TB) {
	t.Helper()
	if sockUp() {
		return
	}
	unshare, err1 := exec.LookPath("unshare")
	rpcbind, err2 := exec.LookPath("rpcbind")
	if err1 != nil || err2 != nil {
		t.Skip("rpcbind not running and cannot be started (apt-get install rpcbind)")
	}
	cmd := exec.Command(unshare, "-n", rpcbind, "-f")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Skipf("start rpcbind: %v", err)
	}
	go func() { _ = cmd.Wait() }()
	for range 50 {
		if sockUp() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Skip("rpcbind did not come up on " + rpcbindSock)
}

func sockUp() bool {
	c, err := net.DialTimeout("unix", rpcbindSock, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
