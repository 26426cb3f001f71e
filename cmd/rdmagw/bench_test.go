package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// benchJSON is the part of the -json output the tests check.
type benchJSON struct {
	Run     benchInfo          `json:"run"`
	Results []benchResult      `json:"results"`
	Ratios  []benchRatio       `json:"ratios"`
	Medians []benchRatioRounds `json:"ratio_medians"`
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

// TestBenchRounds is -rounds 3 on the embedded stack: every workload
// three times on each path, the paths alternated ABBA, a ratio per round
// from that round's two results, and the median of the three.
func TestBenchRounds(t *testing.T) {
	got := runBenchJSON(t, "-embedded", "-duration", "1s", "-ops", "getattr", "-size", "1MiB", "-concurrency", "2", "-rounds", "3")
	if got.Run.Rounds != 3 || len(got.Results) != 6 || len(got.Ratios) != 3 || len(got.Medians) != 1 {
		t.Fatalf("rounds %d: %d results, %d ratios, %d medians", got.Run.Rounds, len(got.Results), len(got.Ratios), len(got.Medians))
	}
	order := []string{"gateway", "direct", "direct", "gateway", "gateway", "direct"}
	byRound := map[int]map[string]benchResult{}
	for i, r := range got.Results {
		if r.Path != order[i] || r.Round != i/2+1 || r.Ops == 0 || r.Errors != 0 {
			t.Errorf("result %d: path %s round %d ops %d errors %d; want %s in round %d", i, r.Path, r.Round, r.Ops, r.Errors, order[i], i/2+1)
		}
		if byRound[r.Round] == nil {
			byRound[r.Round] = map[string]benchResult{}
		}
		byRound[r.Round][r.Path] = r
	}
	var tput []float64
	for i, q := range got.Ratios {
		g, d := byRound[q.Round]["gateway"], byRound[q.Round]["direct"]
		want := g.OpsPerSec / d.OpsPerSec
		if q.Round != i+1 || q.Throughput != want {
			t.Errorf("ratio %d: round %d throughput %v, want round %d's %v", i, q.Round, q.Throughput, i+1, want)
		}
		tput = append(tput, q.Throughput)
	}
	m := got.Medians[0]
	slices.Sort(tput)
	if m.Rounds != 3 || m.Op != "getattr" || m.Throughput != (benchSpread{Median: tput[1], Min: tput[0], Max: tput[2]}) {
		t.Errorf("medians %+v, want throughput of %v", m, tput)
	}
}

// TestBenchRoundSpreads checks the medians and the table of -rounds on
// made-up results: an even count takes the middle two, a ratio a round
// did not measure is left out, and the table has a round column and the
// median lines.
func TestBenchRoundSpreads(t *testing.T) {
	var results []benchResult
	for i, g := range []float64{40, 80, 50, 60} { // gateway ops/s in rounds 1-4, the relay's 100
		cpu := 0.0
		if i != 2 {
			cpu = float64(10 * (i + 1)) // CPU µs/op 10, 20, -, 40 against the relay's 10
		}
		results = append(results,
			benchResult{Op: "read-4k", Path: "gateway", InFlight: 8, Round: i + 1, Ops: 1, OpsPerSec: g, P50Micros: 10, P99Micros: 20, CPUMicrosPerOp: cpu},
			benchResult{Op: "read-4k", Path: "haproxy", InFlight: 8, Round: i + 1, Ops: 1, OpsPerSec: 100, P50Micros: 10, P99Micros: 10, CPUMicrosPerOp: 10})
	}
	s := benchRoundSpreads(benchRatios(results))
	if len(s) != 1 {
		t.Fatalf("%d spreads", len(s))
	}
	if got, want := s[0].Throughput, (benchSpread{Median: 0.55, Min: 0.4, Max: 0.8}); got != want {
		t.Errorf("throughput %+v, want %+v", got, want)
	}
	if got, want := s[0].CPUPerOp, (benchSpread{Median: 2, Min: 1, Max: 4}); got != want {
		t.Errorf("CPU per op %+v, want %+v (round 3 unmeasured)", got, want)
	}
	if got := s[0].AllCPUPerOp; got != (benchSpread{}) {
		t.Errorf("all CPU per op %+v, never measured", got)
	}
	var out bytes.Buffer
	printBenchTable(&out, &benchInfo{Rounds: 4}, results)
	t.Logf("\n%s", out.String())
	for _, want := range []string{"round", "median of the 4 rounds", "0.55x (0.40-0.80)", "2.00x (1.00-4.00)", "2.00x (2.00-2.00)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q", want)
		}
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
		{"bench", "-embedded", "-cut-through", "64KiB"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-cut-through", "lots"},
		{"bench", "-embedded", "-anchors", "netpoll:1"},
		{"bench", "-embedded", "-rounds", "0"},
		{"bench", "-embedded", "-inline", "8KiB"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-inline", "5000"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-inline", "128KiB"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-anchors", "splice:1"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-gateway-procs", "1,-1"},
		{"bench", "-embedded", "-gateway-bin", os.Args[0]},
		{"bench", "-gateway", "127.0.0.1:1", "-backend", "127.0.0.1:2", "-trace", "/tmp/x.trace"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-gateway-bin", "/nonexistent/rdmagw"},
		{"bench", "-spawn-gateway", "-backend", "127.0.0.1:1", "-gateway-bin", os.Args[0] + "," + os.Args[0]},
	} {
		var out, errb bytes.Buffer
		if rc := run(args, &out, &errb); rc != 2 {
			t.Errorf("%v: rc %d, stderr %q", args, rc, errb.String())
		}
	}
}

// -cut-through gives the spawned gateways rdma.cut_through, 0 included.
func TestBenchCutThroughConfig(t *testing.T) {
	for _, c := range []struct {
		flag string
		want gateway.ByteSize
	}{{"", gateway.DefaultCutThrough}, {"0", 0}, {"64KiB", 64 << 10}} {
		cfg, err := gateway.ParseConfig([]byte(fmt.Sprintf(gatewayProcessConfig, 20049, "127.0.0.1", "2049", 9100) +
			(&benchOptions{crc: true}).gatewayRDMAConfig(c.flag)))
		if err != nil || cfg.RDMA.CutThrough != c.want {
			t.Errorf("-cut-through %q: rdma.cut_through %v (%v), want %v", c.flag, cfg.RDMA.CutThrough, err, c.want)
		}
	}
}

// TestBenchInline: -inline 8KiB lets the bench client send a 4 KiB WRITE
// inline to a gateway announcing 8 KiB receive buffers, where by default
// its data goes by Read chunk (an RDMA Read round trip more), and gives
// the gateways -spawn-gateway starts that inline_recv and inline_send.
func TestBenchInline(t *testing.T) {
	cfg, err := gateway.ParseConfig([]byte(fmt.Sprintf(gatewayProcessConfig, 20049, "127.0.0.1", "2049", 9100) +
		(&benchOptions{inline: 8 << 10, crc: true}).gatewayRDMAConfig("")))
	if err != nil || cfg.RDMA.InlineRecv != 8<<10 || cfg.RDMA.InlineSend != 8<<10 {
		t.Fatalf("spawned gateway config: %+v, %v", cfg, err)
	}

	addr := startMem(t)
	gw := forwardtest.StartWith(t, addr, func(c *gateway.Config) {
		c.RDMA.InlineRecv, c.RDMA.InlineSend = 8<<10, 8<<10
	}, nil)
	readChunk := func() float64 {
		snap, err := gwstats.Take(gw.Metrics().Registry)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Bytes("read_chunk", "in")
	}
	write4k := func(extra ...string) (ops int64, chunked float64) {
		before := readChunk()
		got := runBenchJSON(t, append([]string{"-gateway", gw.Addr().String(), "-backend", addr, "-direct=false",
			"-duration", "1s", "-ops", "write-4k", "-size", "1MiB", "-concurrency", "2"}, extra...)...)
		if len(got.Results) != 1 || got.Results[0].Ops == 0 || got.Results[0].Errors != 0 {
			t.Fatalf("results %+v", got.Results)
		}
		return got.Results[0].Ops, readChunk() - before
	}
	// Each run first fills its 1 MiB file with 1 MiB WRITEs (Read chunks
	// whatever the threshold), then writes 4 KiB at a time.
	ops, chunked := write4k()
	if chunked < float64(1<<20+ops*4096) {
		t.Errorf("default threshold: %v bytes by Read chunk for the fill and %d WRITEs of 4 KiB", chunked, ops)
	}
	ops, chunked = write4k("-inline", "8KiB")
	if chunked != 1<<20 {
		t.Errorf("-inline 8KiB: %v bytes by Read chunk, want the 1 MiB fill only (%d WRITEs of 4 KiB inline)", chunked, ops)
	}
}

// counterGrowth keeps the gateway's own counters that grew, per op: not
// gauges, not the runtime's counters, not those that stood still.
func TestCounterGrowth(t *testing.T) {
	m0 := map[string]float64{"rdmagw_calls_total": 10, "rdmagw_replies_total": 10, "rdmagw_connections": 1, "go_memstats_mallocs_total": 100}
	m1 := map[string]float64{"rdmagw_calls_total": 30, "rdmagw_replies_total": 10, "rdmagw_connections": 3, "go_memstats_mallocs_total": 900,
		"rdmagw_ddp_fallbacks_total": 5}
	got := counterGrowth(m0, m1, 20)
	want := map[string]float64{"rdmagw_calls_total": 1, "rdmagw_ddp_fallbacks_total": 0.25}
	if !maps.Equal(got, want) {
		t.Errorf("counterGrowth = %v, want %v", got, want)
	}
}
