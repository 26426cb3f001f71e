package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// TestBenchConns runs `rdmagw bench-conns` end to end for two small
// cases: the gateway is its own process (this test binary standing in
// for rdmagw), the clients carry GETATTRs through it, and the report
// holds the gateway's own RSS, registered bytes and CPU. -gateway-procs
// 3 (more than the default on the 2-CPU machines this runs on) must be
// the gateway's GOMAXPROCS, as its go_sched_gomaxprocs_threads says.
func TestBenchConns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway process")
	}
	t.Setenv(asRdmagwEnv, "1") // the spawned "rdmagw serve" is this binary
	var out, errs bytes.Buffer
	if rc := benchConns([]string{"-conns", "1,3", "-duration", "1s", "-srq-depth", "64", "-gateway-procs", "3", "-json"}, &out, &errs); rc != 0 {
		t.Fatalf("bench-conns exit %d\n%s", rc, errs.String())
	}
	var rs []connsResult
	if err := json.Unmarshal(out.Bytes(), &rs); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rs) != 2 || rs[0].Conns != 1 || rs[1].Conns != 3 {
		t.Fatalf("cases %+v, want 1 then 3 connections", rs)
	}
	for _, r := range rs {
		if r.Ops == 0 || r.Errors != 0 || r.RSSMiB <= 0 || r.Goroutines <= 0 || r.CtxSwPerOp <= 0 {
			t.Errorf("%d connections: %+v", r.Conns, r)
		}
		// Every GETATTR is read from a connection and its reply written
		// to one, on the client side and on the backend side.
		if r.SyscallsPerOp < 1 {
			t.Errorf("%d connections: %.2f read/write calls per op, want at least 1", r.Conns, r.SyscallsPerOp)
		}
		if r.Procs != 3 || r.GOMAXPROCS != 3 {
			t.Errorf("%d connections: runtime.procs %d, GOMAXPROCS in force %v; want 3, 3", r.Conns, r.Procs, r.GOMAXPROCS)
		}
		// The shared receive queue: 64 x the default 4 KiB inline_recv.
		if r.RecvMiB != 0.25 {
			t.Errorf("%d connections: receive pool %v MiB, want 0.25 (srq_depth 64)", r.Conns, r.RecvMiB)
		}
	}
}

// TestBenchConnsRelay runs bench-conns with the haproxy anchor and
// -active: every connection count runs on the gateway and then as TCP
// clients through haproxy (its own process, in front of the same
// server), each loading only the first -active connections, and the
// table pairs each path's fewest and most connections.
func TestBenchConnsRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway process and haproxy")
	}
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy not installed (scripts/install-deps.sh --test)")
	}
	t.Setenv(asRdmagwEnv, "1")
	var out, errs bytes.Buffer
	if rc := benchConns([]string{"-conns", "2,5", "-active", "3", "-relay", "haproxy", "-duration", "1s", "-srq-depth", "64", "-json"}, &out, &errs); rc != 0 {
		t.Fatalf("bench-conns exit %d\n%s", rc, errs.String())
	}
	var rs []connsResult
	if err := json.Unmarshal(out.Bytes(), &rs); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := []struct {
		path          string
		conns, active int
	}{{"gateway", 2, 2}, {"haproxy", 2, 2}, {"gateway", 5, 3}, {"haproxy", 5, 3}}
	if len(rs) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(rs), len(want), rs)
	}
	for i, w := range want {
		r := rs[i]
		if r.Path != w.path || r.Conns != w.conns || r.Active != w.active {
			t.Errorf("result %d: %s, %d connections, %d loaded; want %s, %d, %d", i, r.Path, r.Conns, r.Active, w.path, w.conns, w.active)
		}
		// The relay's own process carried the load: its CPU, its RSS.
		if r.Ops == 0 || r.Errors != 0 || r.CPUPerOpUs <= 0 || r.RSSMiB <= 0 {
			t.Errorf("result %d (%s, %d connections): %+v", i, r.Path, r.Conns, r)
		}
		if (r.Path == "haproxy") != (r.Goroutines == 0 && r.RegisteredMiB == 0) {
			t.Errorf("result %d (%s): goroutines %v, registered %v MiB: gateway metrics on the wrong path", i, r.Path, r.Goroutines, r.RegisteredMiB)
		}
	}
	var table bytes.Buffer
	printConnsTable(&table, rs)
	for _, line := range []string{"this             run 1: 5/2 conns", "haproxy          run 1: 5/2 conns"} {
		if !strings.Contains(table.String(), line) {
			t.Errorf("table has no %q:\n%s", line, table.String())
		}
	}
}

// TestConnsScaling: each path's most connections over its fewest, per
// run, whatever order the cases ran in.
func TestConnsScaling(t *testing.T) {
	rs := []connsResult{
		// 10 µs + 10 µs per op at 16; at 1000 the relay 20 µs and the
		// clients 1.2 cores at 60 ops/s, 20 µs: a flat relay, 10 µs,
		// would have reached 20/(10+20) of the fewest's aggregate.
		{Path: "gateway", Conns: 16, Run: 1, GOMAXPROCS: 2, OpsPerSec: 100, CPUPerOpUs: 10, ClientCores: 100 * 10e-6},
		{Path: "haproxy", Conns: 16, Run: 1, OpsPerSec: 200},
		{Path: "gateway", Conns: 1000, Run: 1, GOMAXPROCS: 2, OpsPerSec: 60, CPUPerOpUs: 20, ClientCores: 60 * 20e-6},
		{Path: "haproxy", Conns: 1000, Run: 1, OpsPerSec: 180},
		{Path: "gateway", Conns: 1000, Run: 2, GOMAXPROCS: 2, OpsPerSec: 80},
		{Path: "gateway", Conns: 16, Run: 2, GOMAXPROCS: 2, OpsPerSec: 100},
		{Path: "gateway", Conns: 16, Run: 2, GOMAXPROCS: 1, OpsPerSec: 50}, // a second 16-connection case: the first stays the fewest
		// -gateway-procs auto: one thread at 16, two at 1000, one path.
		{Path: "gateway", Conns: 16, Run: 2, Procs: -1, ProcsSetting: "auto", GOMAXPROCS: 1, OpsPerSec: 100},
		{Path: "gateway", Conns: 1000, Run: 2, Procs: -1, ProcsSetting: "auto", GOMAXPROCS: 2, OpsPerSec: 90},
		{Path: "gateway", Conns: 16, Run: 3, ProcsSetting: "1", GOMAXPROCS: 1, OpsPerSec: 50}, // no pair
	}
	got := connsScaling(rs)
	want := []connsScale{
		{path: "this", run: 1, fewest: 16, most: 1000, ratio: 0.6},
		{path: "haproxy", run: 1, fewest: 16, most: 1000, ratio: 0.9},
		{path: "this", run: 2, fewest: 16, most: 1000, ratio: 0.8},
		{path: "this procs auto", run: 2, fewest: 16, most: 1000, ratio: 0.9},
	}
	if len(got) != len(want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.path != w.path || g.run != w.run || g.fewest != w.fewest || g.most != w.most || g.ratio < w.ratio-1e-9 || g.ratio > w.ratio+1e-9 {
			t.Errorf("%d: %+v, want %+v", i, g, w)
		}
	}
	near := func(a, b float64) bool { return a > b-1e-9 && a < b+1e-9 }
	if g := got[0]; !near(g.relayCost, 2) || !near(g.clientCost, 2) || !near(g.flatRelay, 20.0/30) {
		t.Errorf("costs %+v, want relay 2x, clients 2x, flat relay %.3f", g, 20.0/30)
	}
	if g := got[1]; g.relayCost != 0 || g.flatRelay != 0 {
		t.Errorf("costs without CPU figures: %+v, want none", g)
	}
}

func TestConnsFlags(t *testing.T) {
	var errs bytes.Buffer
	for _, bad := range [][]string{{"-conns", "0"}, {"-inflight", "0"}, {"-duration", "10ms"}, {"-srq-depth", "-1"}, {"-active", "-1"}, {"-relay", "nginx"}} {
		if _, err := parseConnsFlags(bad, &errs); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	o, err := parseConnsFlags([]string{"-conns", "16,1000", "-gateway-bin", "a,b"}, &errs)
	if err != nil || len(o.conns) != 2 || len(o.bins) != 2 || o.procs != nil {
		t.Fatalf("%+v, %v", o, err)
	}
	o, err = parseConnsFlags([]string{"-gateway-bin", "a,b", "-gateway-procs", "1,0,auto"}, &errs)
	if err != nil {
		t.Fatal(err)
	}
	want := []connsGateway{{"a", 1}, {"a", 0}, {"a", gateway.ProcsAuto}, {"b", 1}, {"b", 0}, {"b", gateway.ProcsAuto}}
	if got := o.cases(); !slices.Equal(got, want) {
		t.Errorf("cases %v, want %v", got, want)
	}
	for _, bad := range []string{"-1", "1,x", "5000"} {
		if _, err := parseConnsFlags([]string{"-gateway-procs", bad}, &errs); err == nil {
			t.Errorf("-gateway-procs %s accepted", bad)
		}
	}
}

// bench-conns' clients complete Sends on transmit by default, as bench's
// client does (no fences, like a Linux client), with MPA CRCs; -crc=false
// turns CRCs off on the clients and in the gateway's configuration.
func TestConnsClientFlags(t *testing.T) {
	var errs bytes.Buffer
	o, err := parseConnsFlags(nil, &errs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.clientIWARP(), (iwarp.Config{CompleteOnTransmit: true}); got != want {
		t.Errorf("default clients: %+v, want %+v", got, want)
	}
	if o, err = parseConnsFlags([]string{"-crc=false", "-client-completion", "placement"}, &errs); err != nil {
		t.Fatal(err)
	}
	if got, want := o.clientIWARP(), (iwarp.Config{DisableCRC: true}); got != want {
		t.Errorf("-crc=false -client-completion placement: %+v, want %+v", got, want)
	}
	cfg, err := gateway.ParseConfig(fmt.Appendf(nil, connsGatewayConfig, 8, 64, o.crc, 16))
	if err != nil || cfg.RDMA.MPACRC {
		t.Errorf("-crc=false: the gateway's configuration %v, mpa_crc %v; want it off", err, cfg != nil && cfg.RDMA.MPACRC)
	}
	if _, err := parseConnsFlags([]string{"-client-completion", "ack"}, &errs); err == nil {
		t.Error("-client-completion ack accepted")
	}
}
