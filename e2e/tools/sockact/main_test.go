package main

import (
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sockact must hand the daemon exactly the listed sockets at fd 3, 4, ...
// with LISTEN_FDS/LISTEN_PID naming them and the daemon's own PID (what
// sd_listen_fds checks), and the stream socket must already listen.
func TestSockact(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sockact")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// Reserve a free port, then let sockact listen on it.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sock := filepath.Join(dir, "s.sock")
	script := `echo "$LISTEN_FDS"; [ "$LISTEN_PID" = $$ ] && echo pid-ok; ` +
		`for fd in 3 4 5; do readlink /proc/$$/fd/$fd; done; ` +
		`[ -e /proc/$$/fd/6 ] && echo extra-fd; exec 7<>/dev/tcp/` + strings.Replace(addr, ":", "/", 1) + ` && echo connected`
	out, err := exec.Command(bin, "unix:"+sock, "tcp:"+addr, "udp:127.0.0.1:0", "--", "bash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sockact: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 6 || lines[0] != "3" || lines[1] != "pid-ok" || lines[5] != "connected" {
		t.Fatalf("got %q, want LISTEN_FDS=3, pid-ok, three sockets, a connection to %s", lines, addr)
	}
	for _, l := range lines[2:5] {
		if !strings.HasPrefix(l, "socket:[") {
			t.Fatalf("fd is %q, want a socket (all: %q)", l, lines)
		}
	}
	if out, err := exec.Command(bin, "tcp:"+addr).CombinedOutput(); err == nil {
		t.Fatalf("no program given: succeeded: %s", out)
	}
}
