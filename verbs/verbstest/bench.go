package verbstest

import (
	"context"
	"fmt"
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// benchSizes are the transfer sizes of the benchmarks: one page (an NFS
// READ of a small file, a Reply chunk) and 1 MiB (the Linux client's
// rsize/wsize).
var benchSizes = []int{4 << 10, 1 << 20}

// Bench runs the RDMA throughput benchmarks against f's provider as
// sub-benchmarks: RDMA Write and RDMA Read of 4 KiB and 1 MiB, with a
// pipeline of outstanding requests as an RPC-over-RDMA responder keeps,
// and, as the baseline in the same run, the same sizes streamed over a
// plain TCP connection on the same address.
//
//	func BenchmarkVerbs(b *testing.B) {
//		verbstest.Bench(b, verbstest.Factory{Provider: iwarp.New()})
//	}
func Bench(b *testing.B, f Factory) {
	for _, op := range []verbs.Opcode{verbs.OpRDMAWrite, verbs.OpRDMARead} {
		for _, size := range benchSizes {
			name := fmt.Sprintf("%s/%dKiB", opName(op), size>>10)
			b.Run(name, func(b *testing.B) { BenchRDMA(b, f, op, size) })
		}
	}
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("TCP/%dKiB", size>>10), func(b *testing.B) { BenchTCP(b, f, size) })
	}
}

// BenchRDMA measures one RDMA opcode (OpRDMAWrite or OpRDMARead) of one
// size between two devices of f's provider. It keeps up to 16 (4 KiB)
// or 4 (1 MiB) requests outstanding, every one signalled, and reports
// bytes per second. The data is checked once after the loop.
func BenchRDMA(b *testing.B, f Factory, op verbs.Opcode, size int) {
	c := resolve(f)
	e := newEnvNoLeakCheck(b, c)
	p := e.connect(b, nil, nil)
	depth := 16
	if size >= 1<<20 {
		depth = 4
	}
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	srvMem := e.srv.region(b, depth*size, all)
	cliMem := e.cli.region(b, depth*size, verbs.AccessLocalWrite)
	fill(srvMem.Bytes(), 81)
	fill(cliMem.Bytes(), 82)
	// One preallocated work request per pipeline slot, so allocations
	// reported are the provider's own. A slot is reused only after its
	// previous request completed (completions arrive in order).
	slots := make([]*verbs.SendWR, depth)
	for k := range slots {
		slots[k] = rdmaWR(0, op, srvMem.at(k*size), cliMem.sge(k*size, size))
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	pipeline(b, ctx, p, slots)
	b.StopTimer()
	// Check the last round landed (a Read's completion means placed
	// locally; a Write's is checked by reading it back).
	if op == verbs.OpRDMARead {
		n := min(b.N, depth) * size
		same(b, "benchmark Read data", cliMem.Bytes()[:n], srvMem.Bytes()[:n])
		return
	}
	check := e.cli.region(b, size, verbs.AccessLocalWrite)
	post(b, p.cli.conn, rdmaWR(1, verbs.OpRDMARead, srvMem.at(0), check.sge(0, size)))
	mustWC(b, e.waitOne(b, p.cli.scq), 1, verbs.OpRDMARead, verbs.StatusSuccess, p.cli.conn)
	same(b, "benchmark Write data", check.Bytes(), cliMem.Bytes()[:size])
}

// pipeline posts b.N work requests on p's client, keeping up to
// len(slots) in flight (request i reuses slots[i%len(slots)]), until
// all have completed successfully.
func pipeline(b *testing.B, ctx context.Context, p *pair, slots []*verbs.SendWR) {
	depth := len(slots)
	wr := func(i int) *verbs.SendWR {
		w := slots[i%depth]
		w.ID = uint64(i)
		return w
	}
	wcs := make([]verbs.WC, depth)
	posted, done := 0, 0
	for done < b.N {
		for posted < b.N && posted-done < depth {
			if err := p.cli.conn.PostSend(wr(posted)); err != nil {
				b.Fatalf("PostSend %d: %v", posted, err)
			}
			posted++
		}
		n := p.cli.scq.Poll(wcs)
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.StatusSuccess {
				b.Fatalf("completion %s of %d posted; client Err %v, server Err %v",
					describe1(wc), posted, p.cli.conn.Err(), p.srv.conn.Err())
			}
		}
		done += n
		if n == 0 {
			if err := p.cli.scq.Wait(ctx); err != nil {
				b.Fatalf("waiting for completion %d: %v", done, err)
			}
		}
	}
}
