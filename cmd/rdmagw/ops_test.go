package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsmem"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/internal/sdnotify/sdnotifytest"
)

// fakeSystemd is a NOTIFY_SOCKET: a unixgram socket collecting what the
// gateway sends.
func fakeSystemd(t *testing.T) chan string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify")
	got := sdnotifytest.Listen(t, name)
	t.Setenv("NOTIFY_SOCKET", name)
	return got
}

// next returns the next notification that starts with one of prefixes,
// skipping others (STATUS= lines come every few seconds).
func next(t *testing.T, got chan string, d time.Duration, prefixes ...string) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m := <-got:
			for _, p := range prefixes {
				if strings.HasPrefix(m, p) {
					return m
				}
			}
		case <-deadline:
			t.Fatalf("no notification %v within %v", prefixes, d)
		}
	}
}

// startServe runs `rdmagw serve` on config text in this process.
func startServe(t *testing.T, config string) (path string, logs *syncBuffer, rc chan int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "gw.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logs = &syncBuffer{}
	rc = make(chan int, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc <- run([]string{"serve", "-c", path}, io.Discard, logs)
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			// Still running (the test failed): stop it, as systemd would.
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("serve did not stop")
			}
		}
	})
	return path, logs, rc
}

func waitExit(t *testing.T, rc chan int, logs *syncBuffer) {
	t.Helper()
	select {
	case code := <-rc:
		if code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not exit:\n%s", logs.String())
	}
}

// READY=1 comes once every listener accepts (RDMA, metrics, admin
// socket); the watchdog is fed every WATCHDOG_USEC/2 while the gateway
// is alive and not while its liveness probe is stalled; STATUS= says
// how many clients; SIGTERM sends STOPPING=1.
func TestServeNotifyWatchdog(t *testing.T) {
	got := fakeSystemd(t)
	ev := watchEvents(t)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	var stalled atomic.Bool
	release := make(chan struct{})
	livenessHook = func(ctx context.Context) {
		if stalled.Load() {
			<-release
		}
	}
	t.Cleanup(func() { livenessHook = nil })
	port, mport := freeLoopbackPort(t), freeLoopbackPort(t)
	sock := filepath.Join(t.TempDir(), "admin.sock")
	_, logs, rc := startServe(t, fmt.Sprintf(`
listen: {address: 127.0.0.1, port: %d}
backend: {address: 127.0.0.1, port: 1}
pool: {max_bytes: 16MiB}
metrics: {listen: "127.0.0.1:%d"}
admin: {socket: %s}
log: {format: json}
`, port, mport, sock))

	if m := next(t, got, 20*time.Second, "READY=1", "WATCHDOG=1"); m != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", m)
	}
	// READY=1 is sent only after every listener is up: all accept now.
	for _, a := range []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))} {
		c, err := net.Dial("tcp", a)
		if err != nil {
			t.Fatalf("%s not accepting at READY=1: %v", a, err)
		}
		c.Close()
	}
	if c, err := net.Dial("unix", sock); err != nil {
		t.Fatalf("admin socket not accepting at READY=1: %v", err)
	} else {
		c.Close()
	}
	if m := next(t, got, 10*time.Second, "STATUS="); !strings.Contains(m, "0 clients") {
		t.Errorf("status %q", m)
	}
	// Fed every WATCHDOG_USEC/2 (100 ms), not faster: count the pings
	// of one second. On a loaded machine pings arrive late, some in a
	// burst (timing four in a row failed then), but lateness shifts
	// pings, it adds none: the window holds its 10 plus the few under
	// way at its start; one a third faster than every 100 ms gives 15.
	next(t, got, 10*time.Second, "WATCHDOG=1")
	for len(got) > 0 {
		<-got
	}
	time.Sleep(time.Second)
	pings := 0
	for len(got) > 0 {
		if <-got == "WATCHDOG=1" {
			pings++
		}
	}
	if pings < 2 || pings > 14 {
		t.Errorf("%d pings in one second: want about 10 (every WATCHDOG_USEC/2 = 100ms)", pings)
	}

	// Wedged: the probe hangs, the pings stop.
	stalled.Store(true)
	time.Sleep(300 * time.Millisecond) // a ping already under way may arrive
	for len(got) > 0 {
		<-got
	}
	time.Sleep(time.Second)
	for len(got) > 0 {
		if m := <-got; m == "WATCHDOG=1" {
			t.Fatal("watchdog fed while the liveness probe was stalled")
		}
	}
	if e := ev.wait(t, evLivenessFailed); e.err == nil {
		t.Error("liveness failure without its error")
	}
	stalled.Store(false)
	close(release)
	next(t, got, 10*time.Second, "WATCHDOG=1")

	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	next(t, got, 10*time.Second, "STOPPING=1")
	waitExit(t, rc, logs)
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("admin socket left behind: %v", err)
	}
}

// A client connected through the gateway keeps working across a reload
// (data verified before and after); the reload's change is in force
// (metrics.sessions turned on serves /debug/sessions); a bad file is
// rejected, counted, and changes nothing; `rdmagw sessions` lists the
// client with its bytes; `rdmagw drain` stops the gateway.
func TestServeReloadSessionsDrain(t *testing.T) {
	baddr := startMem(t)
	bhost, bport, _ := net.SplitHostPort(baddr)
	port, mport := freeLoopbackPort(t), freeLoopbackPort(t)
	sock := filepath.Join(t.TempDir(), "admin.sock")
	config := func(extra string) string {
		return fmt.Sprintf(`
listen: {address: 127.0.0.1, port: %d}
backend: {address: %s, port: %s}
pool: {max_bytes: 64MiB}
admin: {socket: %s}
log: {format: json}
%s`, port, bhost, bport, sock, extra)
	}
	ev := watchEvents(t)
	path, logs, rc := startServe(t, config(`metrics: {listen: "127.0.0.1:`+strconv.Itoa(mport)+`"}`))
	ev.wait(t, evReady)

	ctx, c, root := mountV3(t, port)
	nfstest.V3RoundTrip(t, ctx, c, root, "before", 300<<10, nfsproto.FileSync, "")

	metricsURL := "http://127.0.0.1:" + strconv.Itoa(mport)
	if code := httpStatus(t, metricsURL+gateway.SessionsPath); code != http.StatusNotFound {
		t.Fatalf("/debug/sessions answered %d with metrics.sessions off", code)
	}
	// Reload: metrics.sessions on (live), rdma.inline_send (new
	// connections), metrics.listen (restart only).
	os.WriteFile(path, []byte(config(`metrics: {listen: "127.0.0.1:1", sessions: true}
rdma: {inline_send: 2KiB}`)), 0o644)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	reload := ev.wait(t, evReloaded).reload
	if code := httpStatus(t, metricsURL+gateway.SessionsPath); code != http.StatusOK {
		t.Fatalf("/debug/sessions answered %d after turning metrics.sessions on", code)
	}
	if !slices.Contains(reload.NeedRestart, "metrics.listen") || !slices.Contains(reload.Applied, "metrics.sessions") ||
		!slices.Contains(reload.NewConnections, "rdma.inline_send") {
		t.Errorf("reload result %+v: want metrics.sessions applied, rdma.inline_send for new connections, metrics.listen at restart", reload)
	}
	nfstest.V3RoundTrip(t, ctx, c, root, "after-reload", 300<<10, nfsproto.FileSync, "")

	// A bad file: rejected, nothing changes.
	os.WriteFile(path, []byte(config("rdma: {credits: 0}")), 0o644)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	var fe *gateway.FieldError
	if err := ev.wait(t, evReloadRejected).err; !errors.As(err, &fe) || fe.Field != "rdma.credits" {
		t.Errorf("reload rejected with %v, want the field rdma.credits", err)
	}
	body := httpGet(t, metricsURL+"/metrics")
	for _, want := range []string{`rdmagw_config_reloads_total{mode="forward",result="applied"} 1`, `rdmagw_config_reloads_total{mode="forward",result="rejected"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(body, "reloads"))
		}
	}
	if code := httpStatus(t, metricsURL+gateway.SessionsPath); code != http.StatusOK {
		t.Fatalf("/debug/sessions answered %d after a rejected reload", code)
	}
	nfstest.V3RoundTrip(t, ctx, c, root, "after-bad-reload", 300<<10, nfsproto.FileSync, "")

	// The live view, as a table and as JSON, over the admin socket.
	var out, errb bytes.Buffer
	if code := run([]string{"sessions", "-s", sock, "-json"}, &out, &errb); code != 0 {
		t.Fatalf("sessions -json: %d %s", code, errb.String())
	}
	var s gateway.Sessions
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || len(s.Clients) != 1 {
		t.Fatalf("sessions JSON: %v\n%s", err, out.String())
	}
	cl := s.Clients[0]
	if cl.BytesIn < 3*300<<10 || cl.BytesOut < 3*300<<10 || cl.CreditsGranted != gateway.DefaultCredits {
		t.Errorf("client %+v: want >= %d bytes each way and the credits it connected with", cl, 3*300<<10)
	}
	out.Reset()
	if code := run([]string{"sessions", "-u", metricsURL}, &out, &errb); code != 0 {
		t.Fatalf("sessions: %d %s", code, errb.String())
	}
	if !strings.Contains(out.String(), cl.Peer) || !strings.Contains(out.String(), "forward gateway on") || !strings.Contains(out.String(), "1 clients") {
		t.Errorf("sessions table:\n%s", out.String())
	}
	t.Logf("rdmagw sessions:\n%s", out.String())

	out.Reset()
	if code := run([]string{"drain", "-s", sock, "-wait", "20s"}, &out, &errb); code != 0 {
		t.Fatalf("drain: %d %s %s", code, out.String(), errb.String())
	}
	ev.wait(t, evStopRequested)
	if d := ev.wait(t, evDrained, stuckDrain(t, sock)).drain; d != (gateway.DrainResult{Clients: 1}) {
		t.Errorf("drain %+v, want 1 client and every call answered", d)
	}
	waitExit(t, rc, logs)
}

// mountV3 connects an NFSv3 client over RDMA to the gateway on port and
// mounts /: the test's context, the client and the root handle.
func mountV3(t *testing.T, port int) (context.Context, *nfsclient.V3, []byte) {
	t.Helper()
	ctx := nfstest.Ctx(t)
	tr := nfstest.DialRDMA(t, ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	root, _, err := (&nfsclient.Mount{T: tr}).Mnt(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	return ctx, &nfsclient.V3{T: tr}, root
}

// startMem runs an in-memory NFSv3 server for the test; its address.
func startMem(t *testing.T) string {
	t.Helper()
	mem := nfsmem.New(nfsmem.Config{})
	addr, err := mem.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return addr.String()
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// heldProxy passes TCP both ways between the gateway and the NFS server;
// while held, the server's bytes wait (the calls stay in flight).
type heldProxy struct {
	ln   net.Listener
	mu   sync.Mutex
	open chan struct{} // closed while not held
}

func startHeldProxy(t *testing.T, target string) *heldProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &heldProxy{ln: ln, open: make(chan struct{})}
	close(p.open)
	t.Cleanup(func() { ln.Close(); p.hold(false) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(s, c); s.Close() }()
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						p.mu.Lock()
						open := p.open
						p.mu.Unlock()
						<-open
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

func (p *heldProxy) hold(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		if on {
			p.open = make(chan struct{})
		}
	default:
		if !on {
			close(p.open)
		}
	}
}

// A READ in flight when SIGTERM arrives gets its reply, data verified,
// before serve exits.
func TestServeSIGTERMAnswersCallsInFlight(t *testing.T) {
	baddr := startMem(t)
	px := startHeldProxy(t, baddr)
	bhost, bport, _ := net.SplitHostPort(px.ln.Addr().String())
	port := freeLoopbackPort(t)
	sock := filepath.Join(t.TempDir(), "admin.sock")
	got := fakeSystemd(t)
	ev := watchEvents(t)
	_, logs, rc := startServe(t, fmt.Sprintf(`
listen: {address: 127.0.0.1, port: %d}
backend: {address: %s, port: %s}
pool: {max_bytes: 64MiB}
metrics: {listen: ""}
admin: {socket: %s}
log: {format: json}
`, port, bhost, bport, sock))
	next(t, got, 20*time.Second, "READY=1")

	ctx, c, root := mountV3(t, port)
	data := make([]byte, 200<<10)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	fh, err := c.Create(ctx, root, "inflight", nfsproto.CreateUnchecked, nfsproto.Sattr3{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteAll(ctx, fh, data, nfsclient.IOOptions{Stable: nfsproto.FileSync}); err != nil {
		t.Fatal(err)
	}

	px.hold(true)
	type result struct {
		data []byte
		err  error
	}
	read := make(chan result, 1)
	go func() {
		d, _, err := c.Read(ctx, fh, 0, uint32(len(data)))
		read <- result{d, err}
	}()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var out, errb bytes.Buffer
		run([]string{"sessions", "-s", sock, "-json"}, &out, &errb)
		var s gateway.Sessions
		if json.Unmarshal(out.Bytes(), &s) == nil && len(s.Clients) == 1 && s.Clients[0].CallsInFlight == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call in flight: %s %s", out.String(), errb.String())
		}
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	next(t, got, 10*time.Second, "STOPPING=1")
	ev.wait(t, evStopRequested)
	select {
	case code := <-rc:
		t.Fatalf("serve exited (%d) with a call in flight", code)
	case <-time.After(300 * time.Millisecond):
	}
	px.hold(false)
	r := <-read
	if r.err != nil || !bytes.Equal(r.data, data) {
		t.Fatalf("READ in flight at SIGTERM: %d bytes, %v; want the %d written", len(r.data), r.err, len(data))
	}
	if d := ev.wait(t, evDrained, stuckDrain(t, sock)).drain; d != (gateway.DrainResult{Clients: 1}) {
		t.Errorf("drain %+v, want 1 client and every call answered", d)
	}
	waitExit(t, rc, logs)
}

// stuckDrain returns what a test logs when a drain does not end: the
// sessions (calls in flight) and every goroutine's stack (where a call
// or a Send completion is held).
func stuckDrain(t *testing.T, sock string) func() {
	return func() {
		var out, errb bytes.Buffer
		run([]string{"sessions", "-s", sock, "-json"}, &out, &errb)
		buf := make([]byte, 4<<20)
		t.Logf("sessions: %s %s\ngoroutines:\n%s", out.String(), errb.String(), buf[:runtime.Stack(buf, true)])
	}
}
