package nfstest

import (
	"context"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
	_ "github.com/rdmagw/rdmagw/verbs/iwarp" // registers the "iwarp" provider
)

// OpenIWARP opens the pure-Go iWARP device on ip, closed at the test's
// end.
func OpenIWARP(t testing.TB, ip string) verbs.Device {
	t.Helper()
	p, err := verbs.Lookup("iwarp")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := p.Open(ip)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// DialRDMA connects an RDMA NFS transport to the gateway at addr over the
// pure-Go iWARP provider, closed at the test's end.
func DialRDMA(t testing.TB, ctx context.Context, addr string) *nfsclient.RDMA {
	t.Helper()
	dev := OpenIWARP(t, "127.0.0.1")
	tr, err := nfsclient.DialRDMA(ctx, dev, addr, rdmarpc.RequesterConfig{Credits: 32})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
