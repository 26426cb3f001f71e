// Package reversetest starts reverse gateways for tests (of this
// module's packages above gateway/reverse): on the pure-Go iWARP
// provider, on a free loopback port, stopped and checked at the test's end.
package reversetest

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/reverse"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	_ "github.com/rdmagw/rdmagw/verbs/iwarp" // registers the "iwarp" provider
)

// StartWith runs a reverse gateway on the pure-Go iWARP provider,
// listening for TCP clients on a free loopback port, in front of the
// RPC-over-RDMA server at backend ("host:port"), with the configuration
// changed by tweak (if not nil) and its log written to logs at
// cfg.Log.Level (nil: discarded). At the test's end it stops the gateway,
// reports a Serve error and checks the pool is all given back.
func StartWith(t testing.TB, backend string, tweak func(*gateway.Config), logs io.Writer) *reverse.Gateway {
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
	r, err := reverse.New(&cfg, log)
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
