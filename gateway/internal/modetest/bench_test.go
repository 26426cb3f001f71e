package modetest_test

import (
	"context"
	"testing"

	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// 1 MiB NFSv3 READ and WRITE through the host chain (Go client over TCP
// -> reverse -> iWARP -> forward -> ganesha) and directly over TCP to the
// same ganesha, in one run: compare the ns/op of the pairs for the ratio.
// allocs/op counts the whole process (client, both gateways).
func BenchmarkReverseChain(b *testing.B) {
	g := nfstest.StartGanesha(b)
	fwd := forwardtest.Start(b, g.NFSAddr)
	rev := startReverse(b, fwd.Addr().String(), nil)
	ctx := context.Background()
	root := nfstest.MountRoot(b, ctx, g.MountAddr, g.Export)
	data := nfstest.Pattern(1<<20, 3)
	for _, tc := range []struct{ name, addr string }{{"direct", g.NFSAddr}, {"reverse", rev.Addr().String()}} {
		tr, err := nfsclient.DialTCP(ctx, tc.addr)
		if err != nil {
			b.Fatal(err)
		}
		c := &nfsclient.V3{T: tr}
		fh, err := c.Create(ctx, root, "bench-"+tc.name, nfsproto.CreateUnchecked, nfsproto.Sattr3{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name+"/write-1MiB", func(b *testing.B) {
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := c.Write(ctx, fh, 0, data, nfsproto.Unstable); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/read-1MiB", func(b *testing.B) {
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if got, _, err := c.Read(ctx, fh, 0, 1<<20); err != nil || len(got) != 1<<20 {
					b.Fatal(len(got), err)
				}
			}
		})
		b.Run(tc.name+"/getattr", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := c.Getattr(ctx, fh); err != nil {
					b.Fatal(err)
				}
			}
		})
		tr.Close()
	}
}
