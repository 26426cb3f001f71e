// Package forwardtest starts forward gateways for tests (of this
// module's packages above gateway/forward): on the pure-Go iWARP
// provider, on a free loopback port, stopped and checked at the test's end.
package forwardtest

import (
	"io"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
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
	return gwtest.Start(t, mode, backend, tweak, logs)
}

var mode = gwtest.Mode[*forward.Gateway]{
	Name:     "forward",
	Defaults: func(cfg *gateway.Config) { cfg.Pool.MaxBytes = 64 << 20 },
	New:      forward.New,
	Within:   10 * time.Second,
}
