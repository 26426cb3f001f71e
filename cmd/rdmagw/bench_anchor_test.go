package main

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// TestBenchAnchors is `rdmagw bench -spawn-gateway -anchors
// netpoll:1,epoll:2` against nfs-ganesha (no haproxy): each anchor is
// its own `rdmagw tcprelay` process and path, measured (CPU, context
// switches) and compared with the direct path, and gone after the
// bench. The relays' data is checked byte for byte in
// internal/tcprelay's TestGanesha.
func TestBenchAnchors(t *testing.T) {
	g := nfstest.StartGanesha(t)
	t.Setenv(asRdmagwEnv, "1") // the spawned "rdmagw serve" and "rdmagw tcprelay" are this binary
	_, mport, _ := strings.Cut(g.MountAddr, ":")
	got := runBenchJSON(t, "-spawn-gateway", "-backend", g.NFSAddr, "-mountport", mport, "-export", g.Export,
		"-duration", "1s", "-ops", "getattr,read-4k", "-size", "1MiB", "-concurrency", "2", "-anchors", "netpoll:1,epoll:2")
	paths := []string{"gateway", "direct", "tcprelay-netpoll-p1", "tcprelay-epoll-p2"}
	if len(got.Results) != 2*len(paths) || len(got.Ratios) != 2*3 {
		t.Fatalf("%d results, %d ratios; want %d, 6", len(got.Results), len(got.Ratios), 2*len(paths))
	}
	for i, r := range got.Results {
		if r.Path != paths[i%len(paths)] || r.Ops == 0 || r.Errors != 0 {
			t.Errorf("result %d: %+v", i, r)
		}
		if isAnchorPath(r.Path) && (r.CPUMicrosPerOp <= 0 || r.CtxSwitchesPerOp <= 0) {
			t.Errorf("anchor %s not measured: %+v", r.Path, r)
		}
	}
	for i, r := range got.Ratios {
		if want := []string{"gateway", "tcprelay-netpoll-p1", "tcprelay-epoll-p2"}[i%3]; r.Gateway != want || r.Versus != "direct" || r.Throughput <= 0 {
			t.Errorf("ratio %+v, want %s vs direct", r, want)
		}
	}
	as := got.Run.Anchors
	if len(as) != 2 || as[0].Mode != "netpoll" || as[0].Procs != 1 || as[1].Mode != "epoll" || as[1].Procs != 2 {
		t.Fatalf("anchors %+v", as)
	}
	for _, a := range as {
		if err := syscall.Kill(a.PID, 0); a.PID == 0 || !errors.Is(err, syscall.ESRCH) {
			t.Errorf("anchor %s pid %d: still there after the bench (%v)", a.Path, a.PID, err)
		}
	}
}

func TestParseAnchors(t *testing.T) {
	got, err := parseAnchors("netpoll:1, epoll:2,epoll:2:1")
	if err != nil || len(got) != 3 || got[0].Path != "tcprelay-netpoll-p1" || got[1].Path != "tcprelay-epoll-p2" ||
		got[2].Path != "tcprelay-epoll-p2-w1" || got[2].Workers != 1 || got[1].Workers != 0 {
		t.Fatalf("parseAnchors = %+v, %v", got, err)
	}
	for _, bad := range []string{"netpoll", "splice:1", "epoll:0", "epoll:x", "netpoll:1,", "netpoll:2:1", "epoll:2:3", "epoll:2:0", "epoll:2:1:1"} {
		if _, err := parseAnchors(bad); err == nil {
			t.Errorf("parseAnchors(%q) accepted", bad)
		}
	}
}

func TestTCPRelayBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		rc   int
	}{
		{[]string{"tcprelay"}, 2}, // no -backend
		{[]string{"tcprelay", "-backend", "127.0.0.1:1", "-workers", "-1"}, 2},
		{[]string{"tcprelay", "-backend", "127.0.0.1:1", "extra"}, 2},
		{[]string{"tcprelay", "-mode", "splice", "-backend", "127.0.0.1:1"}, 1},
	} {
		var out, errb bytes.Buffer
		if rc := run(c.args, &out, &errb); rc != c.rc {
			t.Errorf("%v: rc %d, want %d; stderr %q", c.args, rc, c.rc, errb.String())
		}
	}
}
