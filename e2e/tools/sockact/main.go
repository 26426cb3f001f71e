// Command sockact starts a daemon the way systemd socket activation does:
// it opens the listed sockets and runs the daemon with them at fd 3, 4, ...
// and LISTEN_FDS and LISTEN_PID set (sd_listen_fds(3)); it stays as the
// daemon's parent, passes SIGTERM/SIGINT/SIGHUP on and exits as it does.
//
//	sockact unix:/run/rpcbind.sock tcp:127.0.0.1:111 udp:127.0.0.1:111 -- rpcbind -f -w
//
// The kernel lab needs it for rpcbind: Debian 12's rpcbind binds TCP port
// 111 on every address whatever -h says (and aborts with a double free
// for -h 127.0.0.1), while the gateway's own rpcbind responder must own
// port 111 on the gateway's address in the same guest. Handed its sockets,
// rpcbind uses exactly those for IPv4 and local. systemd-socket-activate
// cannot mix stream and datagram sockets, hence this.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	args := os.Args[1:]
	var specs []string
	for len(args) > 0 && args[0] != "--" {
		specs = append(specs, args[0])
		args = args[1:]
	}
	if len(args) < 2 || len(specs) == 0 {
		fail(fmt.Errorf("usage: sockact unix:PATH|tcp:HOST:PORT|udp:HOST:PORT ... -- PROGRAM ARGS..."))
	}
	args = args[1:]
	var files []*os.File
	for _, s := range specs {
		f, err := open(s)
		if err != nil {
			fail(fmt.Errorf("%s: %w", s, err))
		}
		files = append(files, f)
	}
	// The sockets become fd 3, 4, ... of the child (ExtraFiles), set up
	// between fork and exec where nothing else runs; the process cannot
	// move them there itself and exec, since those numbers may be the Go
	// runtime's own descriptors (its epoll fd) until the very exec. A shell
	// sets LISTEN_PID to its own PID and execs the daemon, which keeps it.
	sh := exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$ exec "$@"`, "sh"}, args...)...)
	sh.Env = append(os.Environ(), "LISTEN_FDS="+strconv.Itoa(len(files)))
	sh.Stdin, sh.Stdout, sh.Stderr = os.Stdin, os.Stdout, os.Stderr
	sh.ExtraFiles = files
	if err := sh.Start(); err != nil {
		fail(err)
	}
	for _, f := range files {
		f.Close()
	}
	// Pass the signals that stop a daemon on, and end as it ends.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			sh.Process.Signal(s)
		}
	}()
	err := sh.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fail(err)
	}
}

// open makes one listening (stream) or bound (datagram) socket.
func open(spec string) (*os.File, error) {
	kind, addr, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, fmt.Errorf("want unix:PATH, tcp:HOST:PORT or udp:HOST:PORT")
	}
	switch kind {
	case "unix":
		os.Remove(addr)
		l, err := net.Listen("unix", addr)
		if err != nil {
			return nil, err
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		return l.(*net.UnixListener).File()
	case "tcp":
		l, err := net.Listen("tcp4", addr)
		if err != nil {
			return nil, err
		}
		return l.(*net.TCPListener).File()
	case "udp":
		c, err := net.ListenPacket("udp4", addr)
		if err != nil {
			return nil, err
		}
		return c.(*net.UDPConn).File()
	}
	return nil, fmt.Errorf("unknown socket kind %q", kind)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sockact:", err)
	os.Exit(1)
}
