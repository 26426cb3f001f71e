package nfstest

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
	_ "github.com/rdmagw/rdmagw/verbs/iwarp" // registers the "iwarp" provider
)

// StartGateway runs a forward gateway on the pure-Go iWARP provider on a
// free loopback port in front of backend ("host:port"), for the test.
func StartGateway(t testing.TB, backend string) *gateway.Forward {
	t.Helper()
	return StartGatewayWith(t, backend, nil, nil)
}

// StartGatewayWith is StartGateway with the configuration changed by
// tweak (if not nil) and the gateway's log, at cfg.Log.Level, written to
// logs (nil: discarded). At the test's end it stops the gateway and
// reports a Serve or Close error.
func StartGatewayWith(t testing.TB, backend string, tweak func(*gateway.Config), logs io.Writer) *gateway.Forward {
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
	if tweak != nil {
		tweak(&cfg)
	}
	log := hclog.NewNullLogger()
	if logs != nil {
		log = hclog.New(&hclog.LoggerOptions{Name: "gw", Level: hclog.LevelFromString(cfg.Log.Level),
			JSONFormat: cfg.Log.Format == "json", Output: logs})
	}
	f, err := gateway.NewForward(&cfg, log)
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("gateway Serve did not return after shutdown")
		}
		if err := f.Close(); err != nil {
			t.Errorf("gateway Close: %v", err)
		}
	})
	return f
}

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

// StartReverseWith runs a reverse gateway on the pure-Go iWARP provider,
// listening for TCP clients on a free loopback port, in front of the
// RPC-over-RDMA server at backend ("host:port"), with the configuration
// changed by tweak (if not nil) and its log written to logs at
// cfg.Log.Level (nil: discarded). At the test's end it stops the gateway,
// reports a Serve error and checks the pool is all given back.
func StartReverseWith(t testing.TB, backend string, tweak func(*gateway.Config), logs io.Writer) *gateway.Reverse {
	t.Helper()
	host, port, err := net.SplitHostPort(backend)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfigFor("reverse")
	cfg.Listen.Address, cfg.Listen.Port = "127.0.0.1", 0
	cfg.Backend.Address = host
	cfg.Backend.Port, _ = strconv.Atoi(port)
	cfg.Backend.LocalAddress = "127.0.0.1"
	cfg.Backend.ConnectTimeout = 2 * time.Second
	cfg.Metrics.Listen = ""
	cfg.Pool.MaxBytes = 128 << 20
	if tweak != nil {
		tweak(&cfg)
	}
	log := hclog.NewNullLogger()
	if logs != nil {
		log = hclog.New(&hclog.LoggerOptions{Name: "reverse", Level: hclog.LevelFromString(cfg.Log.Level),
			JSONFormat: cfg.Log.Format == "json", Output: logs})
	}
	r, err := gateway.NewReverse(&cfg, log)
	if err != nil {
		t.Fatalf("reverse gateway: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("reverse Serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("reverse Serve did not return after shutdown")
		}
		r.Close()
		if s, err := gwstats.Take(r.Metrics().Registry); err != nil || s.PoolInUse != 0 {
			t.Errorf("reverse pool: %v bytes still in use after shutdown (%v)", s.PoolInUse, err)
		}
	})
	return r
}
