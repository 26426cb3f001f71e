package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

func TestServeCheck(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"serve", "-check", "-c", "../../configs/forward.yaml"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d, stderr %q", rc, errb.String())
	}
	if !strings.Contains(out.String(), "ok") {
		t.Fatalf("stdout %q", out.String())
	}
}

// An invalid config stops serve at start with the field and the reason.
func TestServeBadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("backend:\n  port: 0\n"), 0o644)
	var out, errb bytes.Buffer
	if rc := run([]string{"serve", "-c", path}, &out, &errb); rc != 1 {
		t.Fatalf("rc %d, want 1", rc)
	}
	if !strings.Contains(errb.String(), "backend.port: must be between 1 and 65535") {
		t.Fatalf("stderr %q", errb.String())
	}
}

// events collects the daemon's events (eventHook) for one test.
type events struct {
	mu   sync.Mutex
	got  []event
	used map[eventKind]int // events of each kind wait has returned
}

// watchEvents hooks the daemon's events until the test ends.
func watchEvents(t *testing.T) *events {
	t.Helper()
	e := &events{used: map[eventKind]int{}}
	eventHook = func(ev event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.got = append(e.got, ev)
	}
	t.Cleanup(func() { eventHook = nil })
	return e
}

// wait returns the next event of kind that wait has not returned yet;
// if none comes within 20 s it runs diag (what the test can say about
// why) and fails.
func (e *events) wait(t *testing.T, kind eventKind, diag ...func()) event {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		e.mu.Lock()
		n := e.used[kind]
		for _, ev := range e.got {
			if ev.kind != kind {
				continue
			}
			if n == 0 {
				e.used[kind]++
				e.mu.Unlock()
				return ev
			}
			n--
		}
		e.mu.Unlock()
		if time.Now().After(deadline) {
			for _, f := range diag {
				f()
			}
			t.Fatalf("no event %d within 20s", kind)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// noBackendConfig is a serve config on loopback whose backend nobody
// serves, with metrics on mport and extra (YAML) after it.
func noBackendConfig(mport int, extra string) string {
	return fmt.Sprintf(`
listen: {address: 127.0.0.1, port: 0}
backend: {address: 127.0.0.1, port: 1}
pool: {max_bytes: 16MiB}
metrics: {listen: "127.0.0.1:%d"}
log: {format: json}
%s`, mport, extra)
}

// serve runs, serves /metrics and shuts down cleanly (exit code 0) on
// SIGTERM.
func TestServeRunsAndStopsOnSIGTERM(t *testing.T) {
	ev := watchEvents(t)
	mport := freeLoopbackPort(t)
	_, logs, rc := startServe(t, noBackendConfig(mport, ""))
	ev.wait(t, evReady)
	if body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)); !strings.Contains(body, "rdmagw_connections_total") {
		t.Fatalf("/metrics lacks rdmagw_connections_total:\n%.500s", body)
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitExit(t, rc, logs)
}

// freeLoopbackPort returns a loopback port free for TCP and UDP a moment
// ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		l.Close()
		if err == nil {
			u.Close()
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

// pmapGetport asks the rpcbind at addr (PMAP v2 GETPORT over UDP, as
// mount.nfs does) for the port of prog/vers over TCP.
func pmapGetport(t *testing.T, addr string, prog, vers uint32) uint32 {
	t.Helper()
	h := oncrpc.CallHeader{XID: 0x5e7e, RPCVers: oncrpc.RPCVersion, Prog: 100000, Vers: 2, Proc: 3,
		Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
	b := make([]byte, h.EncodedLen()+16)
	e := xdr.NewEncoder(b)
	if err := h.Encode(&e); err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint32{prog, vers, 6 /* IPPROTO_TCP */, 0} {
		e.PutUint32(v)
	}
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1024)
	for try := 0; try < 5; try++ {
		if _, err := c.Write(e.Bytes()); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, err := c.Read(buf)
		if err != nil {
			continue
		}
		var rh oncrpc.ReplyHeader
		off, err := rh.Decode(buf[:n])
		if err != nil || rh.XID != h.XID {
			t.Fatalf("GETPORT reply: %v (xid %#x)", err, rh.XID)
		}
		if rh.Stat != oncrpc.MsgAccepted || rh.AcceptStat != oncrpc.Success || n-off != 4 {
			t.Fatalf("GETPORT reply: stat %d accept %d, %d result bytes", rh.Stat, rh.AcceptStat, n-off)
		}
		return binary.BigEndian.Uint32(buf[off:])
	}
	t.Fatalf("no GETPORT reply from %s", addr)
	return 0
}

// With aux_relay enabled, serve starts the relay with the gateway: its
// rpcbind responder answers GETPORT for MOUNT with the relay's MOUNT
// port, its metrics are on the gateway's /metrics, and it stops with the
// gateway on SIGTERM (its ports are free again).
func TestServeStartsAuxRelay(t *testing.T) {
	ev := watchEvents(t)
	rpcbind, mount, mport := freeLoopbackPort(t), freeLoopbackPort(t), freeLoopbackPort(t)
	for mount == rpcbind {
		mount = freeLoopbackPort(t)
	}
	for mport == rpcbind || mport == mount {
		mport = freeLoopbackPort(t)
	}
	_, logs, rc := startServe(t, noBackendConfig(mport, fmt.Sprintf(`aux_relay:
  enabled: true
  listen_address: 127.0.0.1
  rpcbind_port: %d
  mount_port: %d
  filer: {mount_port: 2, nlm_port: 3, nsm_port: 4}
`, rpcbind, mount)))
	ev.wait(t, evReady) // the relay is one of the listeners READY waits for
	rpcbAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcbind))
	if got := pmapGetport(t, rpcbAddr, 100005, 3); got != uint32(mount) {
		t.Errorf("GETPORT MOUNT v3 tcp = %d, want the relay's mount_port %d", got, mount)
	}
	body := httpGet(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", mport))
	if !regexp.MustCompile(`rdmagw_auxrelay_calls_total\{[^}]*mode="forward"[^}]*program="rpcbind"`).MatchString(body) {
		t.Errorf("/metrics lacks the relay's rpcbind call count:\n%s", grepLines(body, "auxrelay"))
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitExit(t, rc, logs)
	for _, p := range []int{rpcbind, mount} {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d still taken after serve stopped: %v", p, err)
			continue
		}
		l.Close()
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// runtime.procs: auto sizes GOMAXPROCS to the load: an idle gateway
// drops to one thread after two seconds, the change is counted by
// reason on /metrics with the thread count in force, and serve gives
// the process back the GOMAXPROCS it found when it stops.
func TestServeAutoProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	ev := watchEvents(t)
	mport := freeLoopbackPort(t)
	_, logs, rc := startServe(t, noBackendConfig(mport, "runtime: {procs: auto}"))
	ev.wait(t, evReady)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	want := []string{`rdmagw_runtime_procs_changes_total{mode="forward",reason="idle"} 1`, "go_sched_gomaxprocs_threads 1"}
	var body string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		body = httpGet(t, url)
		if strings.Contains(body, want[0]) && strings.Contains(body, want[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in 15 s of an idle gateway:\n%s", want, grepLines(body, "procs"))
		}
	}
	if strings.Contains(body, `reason="busy"`) || strings.Contains(body, `reason="waiting"`) {
		t.Errorf("an idle gateway went up:\n%s", grepLines(body, "procs"))
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	waitExit(t, rc, logs)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("after serve, GOMAXPROCS %d, want the 2 it found", got)
	}
}
