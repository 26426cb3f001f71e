package reverse_test

import (
	"fmt"
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
// call, the figure to compare between two versions of the gateway in
// one run (go test -bench ReverseInFlight -count 3, alternating builds).
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
			for i := range total {
				if i == int64(n) {
					// the warm-up calls are out: start timing at the first answer
					<-tokens
					tokens <- struct{}{}
					b.ResetTimer()
					syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
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
		})
	}
}
