// Package reversetest starts reverse gateways for tests (of this
// module's packages above gateway/reverse): on the pure-Go iWARP
// provider, on a free loopback port, stopped and checked at the test's end.
package reversetest

import (
	"io"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/reverse"
	"github.com/rdmagw/rdmagw/internal/gwstats"
	_ "github.com/rdmagw/rdmagw/verbs/iwarp" // registers the "iwarp" provider
)

// StartWith runs a reverse gateway on the pure-Go iWARP provider,
// listening for TCP clients on a free loopback port, in front of the
// RPC-over-RDMA server at backend ("host:port"), with the configuration
// changed by tweak (if not nil) and its log written to logs at
// cfg.Log.Level (nil: discarded). At the test's end it stops the gateway,
// reports a Serve or Close error and checks the pool is all given back.
func StartWith(t testing.TB, backend string, tweak func(*gateway.Config), logs io.Writer) *reverse.Gateway {
	t.Helper()
	return gwtest.Start(t, mode, backend, tweak, logs)
}

var mode = gwtest.Mode[*reverse.Gateway]{
	Name: "reverse",
	Defaults: func(cfg *gateway.Config) {
		cfg.Backend.LocalAddress = "127.0.0.1"
		cfg.Pool.MaxBytes = 128 << 20
	},
	New:     reverse.New,
	Stopped: poolGivenBack,
	Within:  15 * time.Second,
}

// poolGivenBack checks a stopped reverse gateway's pool is all given back.
func poolGivenBack(t testing.TB, r *reverse.Gateway) {
	if s, err := gwstats.Take(r.Metrics().Registry); err != nil || s.PoolInUse != 0 {
		t.Errorf("reverse pool: %v bytes still in use after shutdown (%v)", s.PoolInUse, err)
	}
}
