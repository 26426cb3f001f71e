package nfstest

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
	_ "github.com/rdmagw/rdmagw/verbs/iwarp" // registers the "iwarp" provider
)

// StartGateway runs a forward gateway on the pure-Go iWARP provider on a
// free loopback port in front of backend ("host:port"), for the test.
func StartGateway(t testing.TB, backend string) *gateway.Forward {
	t.Helper()
	host, port, err := net.SplitHostPort(backend)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfig()
	cfg.Listen.Address = "127.0.0.1"
	cfg.Listen.Port = 0
	cfg.Backend.Address = host
	cfg.Backend.Port, _ = strconv.Atoi(port)
	cfg.Backend.ConnectTimeout = 2 * time.Second
	cfg.Metrics.Listen = ""
	cfg.Pool.MaxBytes = 64 << 20
	f, err := gateway.NewForward(&cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("gateway Serve did not return after shutdown")
		}
		f.Close()
	})
	return f
}

// DialRDMA connects an RDMA NFS transport to the gateway at addr over the
// pure-Go iWARP provider, closed at the test's end.
func DialRDMA(t testing.TB, ctx context.Context, addr string) *nfsclient.RDMA {
	t.Helper()
	p, err := verbs.Lookup("iwarp")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := p.Open("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	tr, err := nfsclient.DialRDMA(ctx, dev, addr, rdmarpc.RequesterConfig{Credits: 32})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
