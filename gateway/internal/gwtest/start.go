package gwtest

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
)

// Mode says how Start builds and stops one gateway mode (forwardtest and
// reversetest fill it in).
type Mode[G Server] struct {
	Name     string                // "forward" or "reverse": the defaults, the log's name, error prefixes
	Defaults func(*gateway.Config) // the mode's test defaults, before the test's tweak (nil: none)
	New      func(*gateway.Config, hclog.Logger) (G, error)
	Stopped  func(testing.TB, G) // checks after Close at the test's end (nil: none)
	Within   time.Duration       // how long Serve may take to return after shutdown
}

// Server is what Start needs of a gateway.
type Server interface {
	Serve(context.Context) error
	Close() error
}

// Start runs a gateway of mode m on a free loopback port in front of
// backend ("host:port"), with the configuration changed by m.Defaults
// and then tweak (if not nil) and its log written to logs at
// cfg.Log.Level (nil: discarded). At the test's end it stops the
// gateway, reports a Serve or Close error and runs m.Stopped.
func Start[G Server](t testing.TB, m Mode[G], backend string, tweak func(*gateway.Config), logs io.Writer) G {
	t.Helper()
	host, port, err := net.SplitHostPort(backend)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.DefaultConfigFor(m.Name)
	cfg.Listen.Address, cfg.Listen.Port = "127.0.0.1", 0
	cfg.Backend.Address = host
	cfg.Backend.Port, _ = strconv.Atoi(port)
	cfg.Backend.ConnectTimeout = 2 * time.Second
	cfg.Metrics.Listen = ""
	for _, f := range []func(*gateway.Config){m.Defaults, tweak} {
		if f != nil {
			f(&cfg)
		}
	}
	log := hclog.NewNullLogger()
	if logs != nil {
		log = hclog.New(&hclog.LoggerOptions{Name: m.Name, Level: hclog.LevelFromString(cfg.Log.Level),
			JSONFormat: cfg.Log.Format == "json", Output: logs})
	}
	g, err := m.New(&cfg, log)
	if err != nil {
		t.Fatalf("%s gateway: %v", m.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s Serve: %v", m.Name, err)
			}
		case <-time.After(m.Within):
			t.Errorf("%s Serve did not return within %v of shutdown", m.Name, m.Within)
		}
		if err := g.Close(); err != nil {
			t.Errorf("%s Close: %v", m.Name, err)
		}
		if m.Stopped != nil {
			m.Stopped(t, g)
		}
	})
	return g
}
