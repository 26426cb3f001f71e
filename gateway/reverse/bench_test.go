package reverse_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/ulb"
)

// BenchmarkReverseInFlight: a TCP client keeps 1 or 8 small calls (NFSv3
// GETATTR) in flight through the reverse gateway to the scripted
// RPC-over-RDMA server, which answers each inline. Besides ns/op it
// reports the CPU of the whole process (client, gateway, server) per
// call and its write system calls per call (/proc/self/io syscw: the
// client's, the gateway's and the server's), the figures to compare
// between two versions of the gateway in one run (go test -bench
// ReverseInFlight -count 3, alternating builds).
func BenchmarkReverseInFlight(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			srv := startFakeServer(b, 32, nil)
			gw := startReverse(b, srv.addr(), nil)
			cl := dialRaw(b, gw.Addr().String())
			fh := make([]byte, 32)
			tokens := make(chan struct{}, n)
			var got atomic.Int64
			total := int64(b.N + n) // a warm-up of n calls first
			readErr := make(chan error, 1)
			go func() {
				for got.Load() < total {
					if _, err := cl.recv(time.Minute); err != nil {
						readErr <- err
						return
					}
					got.Add(1)
					tokens <- struct{}{}
				}
				readErr <- nil
			}()
			var ru0 syscall.Rusage
			var w0 int64
			for i := range total {
				if i == int64(n) {
					// the warm-up calls are out: start timing at the first answer
					<-tokens
					tokens <- struct{}{}
					b.ResetTimer()
					syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
					w0 = writeSyscalls(b)
				}
				if i >= int64(n) {
					<-tokens
				}
				if err := cl.send(rpcCall(uint32(i+1), ulb.ProgNFS, 3, 1, xdrOpaque(nil, fh))); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-readErr; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			var ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(writeSyscalls(b)-w0)/float64(b.N), "syscw/op")
		})
	}
}

// writeSyscalls is the process's count of write system calls so far
// (write, writev, ...: syscw in /proc/self/io).
func writeSyscalls(b *testing.B) int64 {
	io, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skipf("no /proc/self/io: %v", err)
	}
	for _, line := range strings.Split(string(io), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Skip("no syscw in /proc/self/io")
	return 0
}
