package forward_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// With rdma.cut_through a READ's data goes to the client's Write chunk in
// parts as it arrives from a server slower than the gateway, the last
// part with the reply, and the client gets every byte; without it the
// same data goes after the whole reply. nfs-ganesha behind a proxy that
// passes its replies on 64 KiB at a time (proxy.tricklePiece).
func TestForwardCutThrough(t *testing.T) {
	g := nfstest.StartGanesha(t)
	px := startProxy(t, g.NFSAddr)
	px.tricklePiece.Store(64 << 10)
	px.tricklePause.Store(int64(2 * time.Millisecond))
	backend := px.addr()
	root := mount3(t, g.MountAddr, g.Export)
	const size = 1 << 20
	data := pattern(size, 7)
	for i, ct := range []gateway.ByteSize{128 << 10, 0} {
		t.Run(fmt.Sprintf("cut_through=%v", ct), func(t *testing.T) {
			gw := startGateway(t, backend, func(c *gateway.Config) { c.RDMA.CutThrough = ct })
			c := dialRDMA(t, gw.Addr().String())
			n := &nfs3{c: c, t: t}
			name := fmt.Sprintf("ct-%d", i)
			fh := n.create(root, name)
			n.writeFile(fh, data, size)
			n.commit(fh)
			for range 3 {
				if got := n.readFile(fh, size); !bytes.Equal(got, data) {
					t.Fatalf("read back %d bytes differing from the %d written (first diff at %d)", len(got), size, firstDiff(got, data))
				}
			}
			n.remove(root, name)
			m := gw.Metrics()
			ahead := gwtest.Metric(t, m, "rdmagw_reply_bytes_written_ahead_total")
			// Three 1 MiB READs arriving 64 KiB at a time: parts of at
			// least cut_through bytes, never a reply's last bytes.
			if ct == 0 && ahead != 0 || ct > 0 && (ahead < 3*float64(ct) || ahead > 3*(size-64<<10)) {
				t.Errorf("bytes written ahead = %v with cut_through %v", ahead, ct)
			}
			gwtest.WaitFor(t, 5*time.Second, "write_chunk bytes counted", func() bool {
				return gwtest.Metric(t, m, "rdmagw_bytes_total", "path", "write_chunk") >= 3*size
			})
			c.close()
			gwtest.WaitFor(t, 5*time.Second, "gateway pool to drain", func() bool { return gwtest.PoolInUse(t, gw.Metrics()) == 0 })
		})
	}
}

// BenchmarkForwardCutThrough: one 1 MiB READ at a time through the
// gateway from nfs-ganesha behind a link slower than the gateway (the
// proxy passes 64 KiB at a time with a pause of 100 µs, which the
// timers here stretch to about a millisecond: some 50 MB/s), with
// rdma.cut_through off and at its default. Off, each READ costs the
// backend's transfer and then the RDMA Writes of the whole MiB; on, the
// Writes of all but the last part overlap the transfer. Compare the two
// ns/op of one run (go test -bench ForwardCutThrough -count 3).
func BenchmarkForwardCutThrough(b *testing.B) {
	g := nfstest.StartGanesha(b)
	px := startProxy(b, g.NFSAddr)
	px.tricklePiece.Store(64 << 10)
	px.tricklePause.Store(int64(100 * time.Microsecond))
	root := mount3(b, g.MountAddr, g.Export)
	const size = 1 << 20
	data := pattern(size, 9)
	for _, ct := range []gateway.ByteSize{0, gateway.DefaultCutThrough} {
		b.Run(fmt.Sprintf("cut_through=%v", ct), func(b *testing.B) {
			gw := startGateway(b, px.addr(), func(c *gateway.Config) { c.RDMA.CutThrough = ct; c.Log.Level = "info" })
			c := dialRDMA(b, gw.Addr().String())
			defer c.close()
			n := &nfs3{c: c, t: b}
			name := fmt.Sprintf("bench-ct-%d", ct)
			fh := n.create(root, name)
			defer n.remove(root, name)
			n.writeFile(fh, data, size)
			n.commit(fh)
			if got := n.readFile(fh, size); !bytes.Equal(got, data) {
				b.Fatalf("read back %d bytes differing from the %d written", len(got), size)
			}
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				if got, _ := n.read(fh, 0, size); len(got) != size {
					b.Fatalf("READ returned %d bytes", len(got))
				}
			}
			b.StopTimer()
			m := gw.Metrics()
			b.ReportMetric(gwtest.Metric(b, m, "rdmagw_reply_bytes_written_ahead_total")/float64(b.N+1)/size, "ahead/op")
		})
	}
}
