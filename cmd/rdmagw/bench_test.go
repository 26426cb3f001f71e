package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// benchJSON is the part of the -json output the tests check.
type benchJSON struct {
	Run     benchInfo     `json:"run"`
	Results []benchResult `json:"results"`
	Ratios  []benchRatio  `json:"ratios"`
}

func runBenchJSON(t *testing.T, args ...string) benchJSON {
	t.Helper()
	var out, errb bytes.Buffer
	rc := run(append([]string{"bench", "-json"}, args...), &out, &errb)
	t.Logf("stderr:\n%s", errb.String())
	if rc != 0 {
		t.Fatalf("rc %d\nstdout:\n%s", rc, out.String())
	}
	var got benchJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, out.String())
	}
	return got
}

// checkBench checks that every op ran on both paths without errors and
// got a ratio.
func checkBench(t *testing.T, got benchJSON, ops ...string) {
	t.Helper()
	if len(got.Results) != 2*len(ops) || len(got.Ratios) != len(ops) {
		t.Fatalf("%d results, %d ratios for %d ops", len(got.Results), len(got.Ratios), len(ops))
	}
	for i, r := range got.Results {
		wantPath := []string{"gateway", "direct"}[i%2]
		if r.Op != ops[i/2] || r.Path != wantPath || r.Ops == 0 || r.Errors != 0 || r.P50Micros <= 0 || r.P99Micros < r.P50Micros {
			t.Errorf("result %d: %+v", i, r)
		}
		if strings.HasPrefix(r.Op, "read") && r.Bytes == 0 {
			t.Errorf("%s over %s moved no bytes", r.Op, r.Path)
		}
	}
}

// TestBenchEmbedded is `rdmagw bench -embedded -duration 2s`: nfsmem and
// a gateway in-process, NFSv3 through the gateway and directly.
func TestBenchEmbedded(t *testing.T) {
	got := runBenchJSON(t, "-embedded", "-duration", "2s", "-ops", "read-1m,write-4k", "-size", "8MiB", "-concurrency", "4")
	checkBench(t, got, "read-1m", "write-4k")
	if !got.Run.Embedded || got.Run.Vers != "3" {
		t.Errorf("run info %+v", got.Run)
	}
}

// TestBenchGaneshaV41 benchmarks NFSv4.1 against nfs-ganesha through a
// gateway started here, and directly.
func TestBenchGaneshaV41(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := forwardtest.Start(t, g.NFSAddr)
	got := runBenchJSON(t, "-gateway", gw.Addr().String(), "-backend", g.NFSAddr, "-vers", "4.1",
		"-export", g.Export, "-duration", "1s", "-ops", "getattr,write-1m,read-4k", "-size", "4MiB", "-concurrency", "4")
	checkBench(t, got, "getattr", "write-1m", "read-4k")
}

// TestBenchTable checks the human-readable report on a short NFSv3 run
// against ganesha (MOUNT on its own port).
func TestBenchTable(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := forwardtest.Start(t, g.NFSAddr)
	_, mport, _ := strings.Cut(g.MountAddr, ":")
	var out, errb bytes.Buffer
	rc := run([]string{"bench", "-gateway", gw.Addr().String(), "-backend", g.NFSAddr, "-mountport", mport,
		"-export", g.Export, "-duration", "1s", "-ops", "read-1m", "-size", "4MiB"}, &out, &errb)
	if rc != 0 {
		t.Fatalf("rc %d\n%s\n%s", rc, out.String(), errb.String())
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{"p50 µs", "gateway / direct", "read-1m"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "-embedded", "-vers", "4.1"},
		{"bench", "-embedded", "-ops", "frobnicate"},
		{"bench", "-embedded", "-ops", "read-2m"},
		{"bench", "-embedded", "-vers", "2"},
		{"bench", "-embedded", "-gateway-procs", "1"},
		{"bench", "-embedded", "-crc=false"},
		{"bench", "-embedded", "-client-completion", "ack"},
		{"bench", "-embedded", "-send-completion", "transmit"},
		{"bench", "-embedded", "-anchors", "netpoll:1"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-anchors", "splice:1"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-gateway-procs", "1,-1"},
	} {
		var out, errb bytes.Buffer
		if rc := run(args, &out, &errb); rc != 2 {
			t.Errorf("%v: rc %d, stderr %q", args, rc, errb.String())
		}
	}
}
