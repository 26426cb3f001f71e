package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The processes `rdmagw bench` starts beside itself (a TCP relay, the
// gateway as its own process, CPU burners) and the CPU accounting of
// the relay processes it compares. Every process started here is
// stopped by its PID when the bench ends (benchProc.stop), and dies
// with the bench if the bench is killed (Pdeathsig).

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which the kernel fixes at 100 on every architecture Go runs Linux on
// (sysconf(_SC_CLK_TCK)).
const userHZ = 100

// parseProcStat returns utime+stime, the CPU a process (all its threads)
// has used, from the text of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may itself hold spaces and parentheses, so
// the fields are counted from the last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	// After ") ": state(3) ppid(4) ... utime(14) stime(15).
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: utime/stime %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// procCPU is the CPU process pid has used so far (utime+stime).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parseProcStat(b)
}

// procUsage is what a process has used so far.
type procUsage struct {
	cpu time.Duration // utime+stime, all its threads
	// syscalls is syscr+syscw of /proc/<pid>/io: the read- and
	// write-family calls (read, readv, pread, write, writev, pwrite...)
	// only; recvfrom, sendto, recvmsg, sendmsg, splice, epoll and futex
	// are not counted there.
	syscalls int64
	// ctxSwitches is voluntary+nonvoluntary context switches summed over
	// /proc/<pid>/task/*/status (the threads alive now).
	ctxSwitches int64
}

// readProcUsage reads what process pid has used so far.
func readProcUsage(pid int) (procUsage, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	var u procUsage
	var err error
	if u.cpu, err = procCPU(pid); err != nil {
		return u, err
	}
	io, err := os.ReadFile(filepath.Join(dir, "io"))
	if err != nil {
		return u, err
	}
	u.syscalls = int64(procField(io, "syscr:") + procField(io, "syscw:"))
	tasks, err := os.ReadDir(filepath.Join(dir, "task"))
	if err != nil {
		return u, err
	}
	for _, t := range tasks {
		st, err := os.ReadFile(filepath.Join(dir, "task", t.Name(), "status"))
		if err != nil {
			continue // the thread has exited
		}
		u.ctxSwitches += int64(procField(st, "voluntary_ctxt_switches:") + procField(st, "nonvoluntary_ctxt_switches:"))
	}
	return u, nil
}

// perOp is what a process used from u0 to u1 divided by ops.
func perOp(u0, u1 procUsage, ops int64) (cpuMicros, syscalls, ctxSwitches float64) {
	n := float64(ops)
	return cpuPerOp(u0.cpu, u1.cpu, ops), float64(u1.syscalls-u0.syscalls) / n, float64(u1.ctxSwitches-u0.ctxSwitches) / n
}

// peerCPU is the CPU process pid has used so far (utime+stime), or -1
// if it is not known (pid 0, or it cannot be read).
func peerCPU(pid int) time.Duration {
	if pid == 0 {
		return -1
	}
	d, err := procCPU(pid)
	if err != nil {
		return -1
	}
	return d
}

// cpuPerOp is the CPU from c0 to c1 (peerCPU) in µs per op; 0 when
// either is unknown.
func cpuPerOp(c0, c1 time.Duration, ops int64) float64 {
	if c0 < 0 || c1 < c0 || ops <= 0 {
		return 0
	}
	return float64((c1 - c0).Nanoseconds()) / 1e3 / float64(ops)
}

// procField is the number of a "Name:   N" or "Name:   N kB" line of a
// /proc file (status, io), 0 if absent.
func procField(b []byte, name string) float64 {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte(name)); ok {
			n, _ := strconv.ParseFloat(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 64)
			return n
		}
	}
	return 0
}

// benchProc is a process the bench started.
type benchProc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *bytes.Buffer // its stdout and stderr, for errors
}

func startBenchProc(name string, cmd *exec.Cmd) (*benchProc, error) {
	p := &benchProc{name: name, cmd: cmd, exited: make(chan struct{}), out: new(bytes.Buffer)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// Pdeathsig: a bench killed (or timed out) takes its children along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

func (p *benchProc) pid() int { return p.cmd.Process.Pid }

func (p *benchProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop ends the process by its PID: SIGTERM, then SIGKILL if it has not
// exited after grace. It returns once the process is reaped.
func (p *benchProc) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// failure describes a process that did not come up.
func (p *benchProc) failure(what string) error {
	state := "still running"
	if !p.alive() {
		state = p.cmd.ProcessState.String()
	}
	return fmt.Errorf("%s %s (%s):\n%s", p.name, what, state, tail(p.out.Bytes(), 2000))
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitListening waits until addr accepts TCP connections or p exits.
func (p *benchProc) waitListening(addr string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if !p.alive() {
			return p.failure("exited")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p.failure("not listening on " + addr + " after " + timeout.String())
}

// freeTCPPort returns a TCP port on 127.0.0.1 that was free a
// moment ago.
func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// haproxyConfig is haproxy in TCP mode: it splices bytes between the
// client and the backend and parses nothing (the cheapest userspace
// relay). Threads are haproxy's default (one per CPU); maxconn is the
// client connections it takes (bench-conns: one per client).
const haproxyConfig = `global
    maxconn %d
defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h
frontend bench
    bind 127.0.0.1:%d
    default_backend nfs
backend nfs
    server nfs %s
`

// haproxyMaxConn is bench's haproxy: its clients are the in-flight
// workers of one workload at a time.
const haproxyMaxConn = 1024

// startHaproxy starts haproxy (from $PATH; Debian's package, see
// scripts/install-deps.sh) in front of backend, in the foreground (-db)
// as one process, taking up to maxconn client connections, and returns
// it with its address.
func startHaproxy(dir, backend string, maxconn int) (*benchProc, string, error) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, "", errors.New("-relay haproxy: haproxy not installed (scripts/install-deps.sh --test)")
	}
	port, err := freeTCPPort()
	if err != nil {
		return nil, "", err
	}
	cf := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cf, fmt.Appendf(nil, haproxyConfig, maxconn, port, backend), 0o644); err != nil {
		return nil, "", err
	}
	p, err := startBenchProc("haproxy", exec.Command(bin, "-db", "-f", cf))
	if err != nil {
		return nil, "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := p.waitListening(addr, 10*time.Second); err != nil {
		p.stop(time.Second)
		return nil, "", err
	}
	return p, addr, nil
}

// gatewayProcessConfig is a forward gateway on the pure-Go provider on
// loopback, with the profiler on its metrics listener.
const gatewayProcessConfig = `mode: forward
listen:
  address: 127.0.0.1
  port: %d
  provider: iwarp
backend:
  address: %s
  port: %s
pool:
  max_bytes: 256MiB
metrics:
  listen: 127.0.0.1:%d
  pprof: true
log:
  level: warn
`

// benchExecutable is the program started as `rdmagw serve` for
// -spawn-gateway: this very binary (tests replace it).
var benchExecutable = os.Executable

// startGatewayProcess runs `rdmagw serve` (this binary) as its own
// process in front of backend, so that its CPU is its own and not the
// bench client's; extra is appended to its configuration (YAML sections
// gatewayProcessConfig does not have). It returns the process, its
// RPC-over-RDMA address and its metrics address.
func startGatewayProcess(dir, backend, extra string) (p *benchProc, addr, metrics string, err error) {
	host, port, err := net.SplitHostPort(backend)
	if err != nil {
		return nil, "", "", fmt.Errorf("-backend %q: %w", backend, err)
	}
	exe, err := benchExecutable()
	if err != nil {
		return nil, "", "", err
	}
	lport, err := freeTCPPort()
	if err != nil {
		return nil, "", "", err
	}
	mport, err := freeTCPPort()
	if err != nil {
		return nil, "", "", err
	}
	cf := filepath.Join(dir, fmt.Sprintf("gateway-%d.yaml", lport))
	if err := os.WriteFile(cf, append(fmt.Appendf(nil, gatewayProcessConfig, lport, host, port, mport), extra...), 0o644); err != nil {
		return nil, "", "", err
	}
	p, err = startBenchProc("rdmagw serve", exec.Command(exe, "serve", "-c", cf))
	if err != nil {
		return nil, "", "", err
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(lport))
	metrics = net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
	if err := p.waitHTTP("http://"+metrics+"/metrics", 20*time.Second); err != nil {
		p.stop(time.Second)
		return nil, "", "", err
	}
	return p, addr, metrics, nil
}

// waitHTTP waits until url answers 200 or p exits.
func (p *benchProc) waitHTTP(url string, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		if r, err := c.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.alive() {
			return p.failure("exited")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p.failure("not serving " + url + " after " + timeout.String())
}

// startBurners starts n processes that each keep a core busy (a shell
// loop), to measure with the cores shared.
func startBurners(n int) ([]*benchProc, error) {
	var ps []*benchProc
	for range n {
		p, err := startBenchProc("cpu burner", exec.Command("/bin/sh", "-c", "while :; do :; done"))
		if err != nil {
			stopAll(ps)
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func stopAll(ps []*benchProc) {
	for _, p := range ps {
		p.stop(5 * time.Second)
	}
}

// fetchCPUProfile takes a CPU profile of secs seconds from a gateway's
// profiler (metrics.pprof on metricsAddr) and writes it to file.
func fetchCPUProfile(metricsAddr string, secs int, file string) error {
	return fetchProfile(metricsAddr, fmt.Sprintf("profile?seconds=%d", secs), time.Duration(secs)*time.Second, file)
}

// fetchTrace takes a runtime trace of secs seconds from a gateway's
// profiler and writes it to file (go tool trace reads it).
func fetchTrace(metricsAddr string, secs int, file string) error {
	return fetchProfile(metricsAddr, fmt.Sprintf("trace?seconds=%d", secs), time.Duration(secs)*time.Second, file)
}

// fetchProfile writes the profile name (heap, profile?seconds=N...) of
// a gateway's profiler to file; it may take d to gather.
func fetchProfile(metricsAddr, name string, d time.Duration, file string) error {
	c := &http.Client{Timeout: d + 30*time.Second}
	r, err := c.Get("http://" + metricsAddr + "/debug/pprof/" + name)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	defer r.Body.Close()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s: %s (is metrics.pprof on?)", name, r.Status, tail(body, 200))
	}
	return os.WriteFile(file, body, 0o644)
}

// perfSyscallEvent counts every system call on entry.
const perfSyscallEvent = "raw_syscalls:sys_enter"

// perfSyscallKinds are the system calls -syscalls perf also counts one
// by one: how a relay moves bytes (read/write, recv/send families), waits
// for them (epoll) and wakes or parks its threads (futex, nanosleep,
// sched_yield). Those the kernel has no tracepoint for are left out.
var perfSyscallKinds = []string{"read", "readv", "write", "writev", "recvfrom", "sendto", "recvmsg", "sendmsg",
	"epoll_wait", "epoll_pwait", "epoll_ctl", "setsockopt", "getsockopt", "splice", "futex", "nanosleep", "sched_yield"}

// sysEnterEvents is where tracefs lists the syscalls:sys_enter_* events.
const sysEnterEvents = "/sys/kernel/tracing/events/syscalls/"

// perfEvents is the -e list of perf stat (program bin): every call, then
// each kind with a tracepoint. After a boot tracefs is not mounted until
// perf mounts it for the first tracepoint it needs, so that the kinds
// would all seem missing (a fresh CI machine counted 0 writes): a
// trivial perf stat of the one event every kernel has mounts it first.
func perfEvents(bin string) string {
	if _, err := os.Stat(sysEnterEvents); err != nil {
		exec.Command(bin, "stat", "-e", perfSyscallEvent, "--", "true").Run()
	}
	ev := []string{perfSyscallEvent}
	for _, k := range perfSyscallKinds {
		if _, err := os.Stat(sysEnterEvents + "sys_enter_" + k); err == nil {
			ev = append(ev, "syscalls:sys_enter_"+k)
		}
	}
	return strings.Join(ev, ",")
}

// startPerfSyscalls counts every system call of process pid's threads,
// and the perfSyscallKinds one by one, with `perf stat` (-syscalls perf)
// until stopPerfCount. It returns once perf counts: perf starts with
// its events disabled (-D -1), and the events are enabled through its
// control pipe (--control), whose answer comes after perf has attached
// to every thread. A fixed wait instead undercounted on a loaded machine
// (perf's first start there took over a second: TestPerfSyscalls saw
// none of the writes made meanwhile).
func startPerfSyscalls(pid int) (*benchProc, error) {
	bin, err := exec.LookPath("perf")
	if err != nil {
		return nil, errors.New("-syscalls perf: perf not installed (Debian: linux-perf)")
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	defer ctlW.Close()
	defer ackR.Close()
	cmd := exec.Command(bin, "stat", "-x,", "-D", "-1", "--control", "fd:3,4", "-e", perfEvents(bin), "-p", strconv.Itoa(pid))
	cmd.ExtraFiles = []*os.File{ctlR, ackW} // fds 3 and 4
	p, err := startBenchProc("perf stat", cmd)
	ctlR.Close()
	ackW.Close()
	if err != nil {
		return nil, err
	}
	if err := perfEnable(ctlW, ackR, 10*time.Second); err != nil {
		p.stop(time.Second)
		return nil, p.failure(err.Error())
	}
	return p, nil
}

// perfEnable asks a perf started with --control to enable its events
// and waits for its acknowledgement.
func perfEnable(ctl io.Writer, ack *os.File, timeout time.Duration) error {
	if _, err := io.WriteString(ctl, "enable\n"); err != nil {
		return fmt.Errorf("enable: %w", err)
	}
	_ = ack.SetReadDeadline(time.Now().Add(timeout))
	var b [16]byte
	n, err := ack.Read(b[:])
	if err != nil || !strings.HasPrefix(string(b[:n]), "ack") {
		return fmt.Errorf("no acknowledgement of enable within %v (%q, %v)", timeout, b[:n], err)
	}
	return nil
}

// stopPerfCount stops a `perf stat` (SIGINT, on which it prints its
// counts) and returns every call's count and the counts by kind (the
// kinds counted, by name).
func (p *benchProc) stopPerfCount() (int64, map[string]int64, error) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.stop(time.Second)
		return 0, nil, p.failure("did not stop on SIGINT")
	}
	counts := parsePerfCounts(p.out.Bytes())
	all, ok := counts[perfSyscallEvent]
	if !ok {
		return 0, nil, fmt.Errorf("perf stat: no count of %s in %q", perfSyscallEvent, tail(p.out.Bytes(), 300))
	}
	kinds := make(map[string]int64)
	for ev, n := range counts {
		if k, ok := strings.CutPrefix(ev, "syscalls:sys_enter_"); ok {
			kinds[k] = n
		}
	}
	return all, kinds, nil
}

// parsePerfCounts reads the counts of `perf stat -x,` output
// ("12345,,raw_syscalls:sys_enter,..."), by event; events perf could
// not count ("<not counted>") are left out.
func parsePerfCounts(out []byte) map[string]int64 {
	m := make(map[string]int64)
	for line := range bytes.Lines(out) {
		f := bytes.Split(bytes.TrimSpace(line), []byte(","))
		if len(f) < 3 {
			continue
		}
		if n, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
			m[string(f[2])] = n
		}
	}
	return m
}
