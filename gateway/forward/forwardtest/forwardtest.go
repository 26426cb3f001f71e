// Package forwardtest starts forward gateways for tests (of this
// module's packages above gateway/forward): on the pure-Go iWARP
// provider, on a free loopback port, stopped and checked at the test's end.
package forwardtest

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	_ "github.com/rdmagw/rdmagw/verbs/iwarp" // registers the "iwarp" provider
)

// Start runs a forward gateway on the pure-Go iWARP provider on a
// free loopback port in front of backend ("host:port"), for the test.
func Start(t testing.TB, backend string) *forward.Gateway {
	t.Helper()
	return StartWith(t, backend, nil, nil)
}

// StartWith is Start with the configuration changed by
// tweak (if not nil) and the gateway's log, at cfg.Log.Level, written to
// logs (nil: discarded). At the test's end it stops the gateway and
// reports a Serve or Close error.
func StartWith(t testing.TB, backend string, tweak func(*gateway.Config), logs io.Writer) *forward.Gateway {
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
	f, err := forward.New(&cfg, log)
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
