package forward_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfsmem"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// BenchmarkForwardConns: many RDMA clients on one forward gateway (issue
// 12 item 4). Each of N connections (pure-Go iWARP on loopback, one
// client device and pool for all) keeps 2 GETATTRs in flight against the
// in-memory NFSv3 server for 3 s; the gateway grants the default 128
// credits per connection. Reported: aggregate ops/s, the process's CPU
// time per op over the load (client, gateway and server: on a shared
// machine the steadier figure), the process's RSS
// at the end of the load and its growth over the baseline before the
// gateway started (gateway and clients share the process), the
// gateway's registered bytes (data pool + receive pool), the clients'
// registered bytes (to subtract), the Go heap in use after a GC and the
// goroutines. srq=0 posts credits + 8 receives per connection, srq=N
// shares N. Run one case per process (RSS never shrinks), e.g.
//
//	go test ./gateway/forward -run '^$' -bench 'ForwardConns/conns=1000/srq=4096$' -benchtime 1x
//
// RDMAGW_BENCH_HEAPPROFILE=file also writes a heap profile while the
// connections are up, RDMAGW_BENCH_CPUPROFILE=file a CPU profile of the
// load.
func BenchmarkForwardConns(b *testing.B) {
	for _, n := range []int{16, 1000} {
		for _, srq := range []int{0, 4096} {
			b.Run("conns="+strconv.Itoa(n)+"/srq="+strconv.Itoa(srq), func(b *testing.B) { benchConns(b, n, srq) })
		}
	}
}

func benchConns(b *testing.B, conns, srq int) {
	runtime.GC()
	rss0 := rssBytes(b)
	mem := nfsmem.New(nfsmem.Config{})
	addr, err := mem.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	gw := forwardtest.StartWith(b, addr.String(), func(c *gateway.Config) {
		c.RDMA.SRQDepth = srq
		c.Connections.Max = 2048
		c.Connections.MaxPerAddress = 0
	}, nil)
	root := mount3(b, addr.String(), "/")
	dev := nfstest.OpenIWARP(b, "127.0.0.1")
	pd, err := dev.AllocPD()
	if err != nil {
		b.Fatal(err)
	}
	defer pd.Close()
	pool, err := rdmarpc.NewPool(pd, rdmarpc.PoolConfig{MaxBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	rqs := make([]*rdmarpc.RequesterConn, conns)
	for i := range rqs {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rqs[i], err = rdmarpc.DialRequester(ctx, dev, gw.Addr().String(), rdmarpc.RequesterConfig{Pool: pool, Credits: 4, InlineRecv: 1024, InlineSend: 1024})
		cancel()
		if err != nil {
			b.Fatalf("connection %d: %v", i, err)
		}
	}
	defer func() {
		for _, q := range rqs {
			q.Close()
		}
	}()
	args := new(enc).opaque(root).b
	var ops atomic.Int64
	var failed atomic.Value
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Second)
	defer stop()
	if path := os.Getenv("RDMAGW_BENCH_CPUPROFILE"); path != "" { // the load only, not the connection setup
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	for _, q := range rqs {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := getattrLoop(ctx, q, pool, args, &ops); err != nil {
					failed.Store(err)
				}
			}()
		}
	}
	wg.Wait()
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	rss := rssBytes(b)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if path := os.Getenv("RDMAGW_BENCH_HEAPPROFILE"); path != "" { // where the heap goes, connections still up
		if f, err := os.Create(path); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	m := gw.Metrics()
	b.ReportMetric(float64(ops.Load())/el.Seconds(), "ops/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(ops.Load(), 1)), "cpu_us/op")
	b.ReportMetric(float64(rss)/(1<<20), "rss_MiB")
	b.ReportMetric(float64(rss-rss0)/(1<<20), "rss_growth_MiB")
	b.ReportMetric((gwtest.Metric(b, m, "rdmagw_pool_bytes_registered")+gwtest.Metric(b, m, "rdmagw_recv_pool_bytes_registered"))/(1<<20), "gw_reg_MiB")
	b.ReportMetric(gwtest.Metric(b, m, "rdmagw_recv_pool_bytes_registered")/(1<<20), "gw_recv_MiB")
	b.ReportMetric(float64(pool.Mapped())/(1<<20), "cli_reg_MiB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap_MiB")
	b.ReportMetric(float64(runtime.NumGoroutine()), "goroutines")
}

// getattrLoop sends GETATTRs of the root on q until ctx ends.
func getattrLoop(ctx context.Context, q *rdmarpc.RequesterConn, pool *rdmarpc.Pool, args []byte, ops *atomic.Int64) error {
	head := gwtest.EncodeCall(0, ulb.ProgNFS, 3, nfs3Getattr, args)
	hb, err := pool.Get(len(head))
	if err != nil {
		return err
	}
	defer hb.Release()
	copy(hb.Bytes, head)
	var msg rdmarpc.Message
	var res rdmarpc.Result
	for ctx.Err() == nil {
		xid := testXID.Add(1)
		binary.BigEndian.PutUint32(hb.Bytes, xid)
		msg.Reset()
		msg.XID = xid
		msg.Append(rdmarpc.Piece{Data: hb.Bytes, Buf: hb})
		if err := q.Call(context.Background(), &msg, nil, &res); err != nil {
			return err
		}
		res.Release()
		ops.Add(1)
	}
	return nil
}

// rssBytes is the process's resident set (VmRSS).
func rssBytes(b testing.TB) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is the process's user + system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
