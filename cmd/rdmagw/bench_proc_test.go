package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// TestMain lets the test binary stand in for rdmagw when the bench
// starts "rdmagw serve" as its own process (-spawn-gateway): the bench
// runs os.Executable, which in a test is this binary.
func TestMain(m *testing.M) {
	if os.Getenv(asRdmagwEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const asRdmagwEnv = "RDMAGW_TEST_AS_RDMAGW"

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses; utime 1234, stime 766.
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 766 0 0 20 0 9 0 100 1000000 500 18446744073709551615\n"
	got, err := parseProcStat([]byte(line))
	if err != nil || got != 20*time.Second {
		t.Fatalf("parseProcStat = %v, %v; want 20s", got, err)
	}
	for _, bad := range []string{
		"",
		"4242 noparen S 1 2 3",
		"4242 (x) S 1 4242 4242 0 -1 4194560 1000 0 0",           // cut short before utime
		"4242 (x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 12x 766", // not a number
	} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
}

// TestProcCPU reads a real /proc entry: a child that burns CPU shows
// CPU used, and a process that does not exist is an error.
func TestProcCPU(t *testing.T) {
	ps, err := startBurners(1)
	if err != nil {
		t.Fatal(err)
	}
	defer stopAll(ps)
	pid := ps[0].pid()
	for {
		d, err := procCPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		if d > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopAll(ps)
	if _, err := procCPU(pid); err == nil {
		t.Errorf("procCPU of the stopped pid %d: no error", pid)
	}
}

func TestBenchTableCPU(t *testing.T) {
	results := []benchResult{
		{Op: "getattr", Path: "gateway", InFlight: 1, Ops: 100, OpsPerSec: 50, P50Micros: 30, P99Micros: 60, CPUProcess: "rdmagw", CPUMicrosPerOp: 40, SyscallsPerOp: 4.25, CtxSwitchesPerOp: 3.5,
			ClientCPUMicrosPerOp: 20, ServerCPUMicrosPerOp: 40},
		{Op: "getattr", Path: "haproxy", InFlight: 1, Ops: 100, OpsPerSec: 100, P50Micros: 20, P99Micros: 40, CPUProcess: "haproxy", CPUMicrosPerOp: 10,
			ClientCPUMicrosPerOp: 10, ServerCPUMicrosPerOp: 30},
		{Op: "getattr", Path: "gateway", InFlight: 8, Ops: 100, OpsPerSec: 90, P50Micros: 30, P99Micros: 60},
		{Op: "getattr", Path: "haproxy", InFlight: 8, Ops: 100, OpsPerSec: 100, P50Micros: 30, P99Micros: 60, CPUMicrosPerOp: 10},
	}
	r := benchRatios(results)
	if len(r) != 2 || r[0].InFlight != 1 || r[0].Versus != "haproxy" || r[0].Throughput != 0.5 || r[0].CPUPerOp != 4 || r[0].AllCPUPerOp != 2 ||
		r[1].InFlight != 8 || r[1].CPUPerOp != 0 || r[1].AllCPUPerOp != 0 {
		t.Fatalf("ratios %+v", r)
	}
	var out bytes.Buffer
	printBenchTable(&out, &benchInfo{GatewayPID: 10, RelayPID: 11, Relay: "haproxy"}, results)
	t.Logf("\n%s", out.String())
	for _, want := range []string{"CPU µs/op", "syscalls/op", "ctx sw/op", "read- and write-family calls only", "gateway / haproxy", "4.00x", "2.00x", "40.0", "pid 10", "haproxy: pid 11", "client µs/op", "all CPU per op"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
	// What is not measured at 8 in flight shows as "-" at the end of three
	// lines: the gateway's and haproxy's results (no server CPU) and the
	// ratio (no all-CPU figure).
	n := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasSuffix(strings.TrimRight(l, " "), " -") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d lines ending unmeasured, want 3", n)
	}
}

// TestBenchRelay is `rdmagw bench -spawn-gateway -relay haproxy` against
// nfs-ganesha: the gateway as its own process and haproxy in TCP mode in
// front of the same ganesha, CPU per op of both, a CPU burner beside
// them and a CPU profile of the gateway; two gateways (-gateway-procs
// 1,2), each compared with haproxy; every process the bench started is
// gone afterwards. With RDMAGW_BENCH_ARGS set (scripts/bench-relay.sh)
// it runs those bench flags instead and prints the table: the
// measurement, not a test.
func TestBenchRelay(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy not installed (scripts/install-deps.sh --test)")
	}
	g := nfstest.StartGanesha(t)
	t.Setenv(asRdmagwEnv, "1") // the spawned "rdmagw serve" is this binary
	_, mport, _ := strings.Cut(g.MountAddr, ":")
	base := []string{"-spawn-gateway", "-relay", "haproxy", "-backend", g.NFSAddr, "-mountport", mport, "-export", g.Export, "-backend-pid", strconv.Itoa(g.Pid)}
	if env := os.Getenv("RDMAGW_BENCH_ARGS"); env != "" {
		var out bytes.Buffer
		rc := run(append(append([]string{"bench"}, base...), strings.Fields(env)...), &out, os.Stderr)
		os.Stdout.Write(out.Bytes())
		if rc != 0 {
			t.Fatalf("rc %d", rc)
		}
		return
	}
	prof := filepath.Join(t.TempDir(), "gw.pprof")
	trace := filepath.Join(t.TempDir(), "gw.trace")
	got := runBenchJSON(t, append(base, "-duration", "1s", "-ops", "getattr,read-4k", "-size", "1MiB",
		"-concurrency", "1,4", "-burn", "1", "-cpuprofile", prof, "-trace", trace, "-profile-op", "getattr", "-gateway-procs", "1,2")...)
	if len(got.Results) != 12 || len(got.Ratios) != 8 {
		t.Fatalf("%d results, %d ratios; want 12, 8", len(got.Results), len(got.Ratios))
	}
	for _, r := range got.Results {
		if r.Ops == 0 || r.Errors != 0 || r.CPUMicrosPerOp <= 0 || r.CtxSwitchesPerOp <= 0 || r.ClientCPUMicrosPerOp <= 0 || r.ServerCPUMicrosPerOp <= 0 ||
			(r.Path != "gateway-p1" && r.Path != "gateway-p2" && r.Path != "haproxy") {
			t.Errorf("result %+v", r)
		}
		// One in flight, every call is its own round: the gateway writes
		// the call to the server and the reply back to the client, at
		// least two write-family calls as /proc/<pid>/io counts them (its
		// reads are recvmsg, which it does not count).
		if r.Path != "haproxy" && r.InFlight == 1 && r.SyscallsPerOp < 2 {
			t.Errorf("gateway %s at 1 in flight: %.2f syscalls per op, want at least 2", r.Op, r.SyscallsPerOp)
		}
		// The gateway's own count of the calls it carried, read from its
		// /metrics around the run: one per op (the READ workload's first
		// op also looks the file up), none on haproxy's path.
		calls, replies := r.GatewayCountersPerOp[metricname.CallsTotal], r.GatewayCountersPerOp[metricname.RepliesTotal]
		if r.Path == "haproxy" && r.GatewayCountersPerOp != nil || r.Path != "haproxy" && (calls < 1 || calls > 1.1 || replies < 1 || replies > 1.1) {
			t.Errorf("%s %s@%d: gateway counters per op %v", r.Path, r.Op, r.InFlight, r.GatewayCountersPerOp)
		}
	}
	for i, r := range got.Ratios {
		if want := []string{"gateway-p1", "gateway-p2"}[i%2]; r.Gateway != want || r.Versus != "haproxy" || r.CPUPerOp <= 0 || r.AllCPUPerOp <= 0 {
			t.Errorf("ratio %+v, want %s vs haproxy", r, want)
		}
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a pprof profile is gzipped protobuf
		t.Errorf("CPU profile: %d bytes, %v", len(b), err)
	}
	// A runtime trace starts "go 1.N trace"; one of the gateway serving
	// a second of GETATTRs holds far more than its header.
	b, err = os.ReadFile(trace)
	if err != nil || !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:16], []byte(" trace")) || len(b) < 16<<10 {
		t.Errorf("runtime trace: %d bytes (%q...), %v", len(b), b[:min(len(b), 16)], err)
	}
	if !strings.HasPrefix(got.Run.Trace, "getattr@4 ") || !strings.HasPrefix(got.Run.CPUProfile, "getattr@4 ") {
		t.Errorf("run info: trace %q, CPU profile %q; want both getattr@4", got.Run.Trace, got.Run.CPUProfile)
	}
	gws := got.Run.Gateways
	if got.Run.GatewayPID == 0 || got.Run.RelayPID == 0 || len(got.Run.Burners) != 1 || len(gws) != 2 ||
		gws[0].PID != got.Run.GatewayPID || gws[0].Procs != 1 || gws[1].Procs != 2 ||
		gws[0].ProcsSetting != "1" || gws[1].ProcsSetting != "2" {
		t.Fatalf("run info %+v", got.Run)
	}
	for _, pid := range append([]int{gws[0].PID, gws[1].PID, got.Run.RelayPID}, got.Run.Burners...) {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still there after the bench: %v", pid, err)
		}
	}
}

// TestBenchGatewayBin is `rdmagw bench -spawn-gateway -gateway-bin a,b`
// against nfs-ganesha: one gateway runs each program (two scripts that
// note their PID and exec this binary), each its own path named after
// the program, with results.
func TestBenchGatewayBin(t *testing.T) {
	g := nfstest.StartGanesha(t)
	t.Setenv(asRdmagwEnv, "1")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var bins []string
	for _, name := range []string{"rdmagw-old", "rdmagw-new"} {
		bin := filepath.Join(dir, name)
		script := "#!/bin/sh\necho $$ > " + bin + ".pid\nexec " + self + ` "$@"` + "\n"
		if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		bins = append(bins, bin)
	}
	_, mport, _ := strings.Cut(g.MountAddr, ":")
	got := runBenchJSON(t, "-spawn-gateway", "-backend", g.NFSAddr, "-mountport", mport, "-export", g.Export,
		"-duration", "1s", "-ops", "getattr", "-size", "1MiB", "-concurrency", "1", "-gateway-bin", strings.Join(bins, ","))
	gws := got.Run.Gateways
	if len(gws) != 2 || len(got.Results) != 3 || len(got.Ratios) != 2 {
		t.Fatalf("%d gateways, %d results, %d ratios; want 2, 3, 2", len(gws), len(got.Results), len(got.Ratios))
	}
	for i, gw := range gws {
		name := filepath.Base(bins[i])
		if gw.Path != "gateway-"+name || gw.Bin != bins[i] {
			t.Errorf("gateway %d: path %q, program %q; want gateway-%s, %s", i, gw.Path, gw.Bin, name, bins[i])
		}
		b, err := os.ReadFile(bins[i] + ".pid")
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid != gw.PID {
			t.Errorf("%s: gateway pid %d, the program ran as %q (%v)", name, gw.PID, b, err)
		}
	}
	for _, r := range got.Results {
		if r.Ops == 0 || r.Errors != 0 {
			t.Errorf("result %+v", r)
		}
	}
}

// TestProcUsage reads this process's /proc entries: a file written and
// read back counts (at least) a write and a read, the threads have been
// switched, and the two context-switch lines are told apart.
func TestProcUsage(t *testing.T) {
	u0, err := readProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(f); err != nil {
		t.Fatal(err)
	}
	u1, err := readProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := u1.syscalls - u0.syscalls; d < 2 {
		t.Errorf("syscr+syscw grew by %d over a write and a read, want at least 2", d)
	}
	if u1.ctxSwitches <= 0 || u1.cpu <= 0 {
		t.Errorf("usage %+v: no context switches or CPU", u1)
	}
	st := []byte("Name:\tx\nVmRSS:\t  2048 kB\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t5\n")
	if v, n, rss := procField(st, "voluntary_ctxt_switches:"), procField(st, "nonvoluntary_ctxt_switches:"), procField(st, "VmRSS:"); v != 7 || n != 5 || rss != 2048 {
		t.Errorf("procField: voluntary %v, nonvoluntary %v, VmRSS %v; want 7, 5, 2048", v, n, rss)
	}
}

// TestPerfSyscalls counts this process's system calls with perf stat
// (-syscalls perf): 50 writes to a file, 20 ms apart, all counted
// (startPerfSyscalls returns once perf counts, however late perf
// attaches on a loaded machine).
func TestPerfSyscalls(t *testing.T) {
	if _, err := exec.LookPath("perf"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs perf (linux-perf) and root")
	}
	p, err := startPerfSyscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(time.Second)
	f, err := os.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 50 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	n, kinds, err := p.stopPerfCount()
	if err != nil || n < 50 || kinds["write"] < 50 || kinds["write"] > n {
		t.Fatalf("perf counted %d system calls, %d writes (%v), want at least 50 of each, writes among them", n, kinds["write"], err)
	}
	got := parsePerfCounts([]byte("12,,raw_syscalls:sys_enter,1,100.00,,\n<not counted>,,syscalls:sys_enter_futex,0,0.00,,\n3,,syscalls:sys_enter_read,1,100.00,,\n"))
	if len(got) != 2 || got["raw_syscalls:sys_enter"] != 12 || got["syscalls:sys_enter_read"] != 3 {
		t.Errorf("parsePerfCounts: %v", got)
	}
}
