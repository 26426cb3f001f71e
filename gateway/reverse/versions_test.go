package reverse_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/ulb"
)

// backend.rdma_version against a version-one server (the fake server
// answers ERR_VERS to version two, as knfsd): with "1" nothing is offered;
// a reload to auto applies to the next client's connection, which offers
// version two once, falls back and is counted; the next connection starts
// in version one from memory (no second ERR_VERS, no second fallback).
func TestReverseRDMAVersionReloadAndFallback(t *testing.T) {
	srv := startFakeServer(t, 32, nil)
	rev := startReverse(t, srv.addr(), func(c *gateway.Config) { c.Backend.RDMAVersion = "1" })
	m := rev.Metrics()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func() {
		t.Helper()
		tr, err := nfsclient.DialTCP(ctx, rev.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if _, err := tr.Call(ctx, ulb.ProgNFS, 3, 0, nil); err != nil {
			t.Fatalf("NULL: %v", err)
		}
	}
	state := func(errVers, v1, fallbacks int) {
		t.Helper()
		srv.mu.Lock()
		got := srv.errVers
		srv.mu.Unlock()
		c1 := gwtest.Metric(t, m, metricname.RDMAConnectionsByVersionTotal, "version", "1")
		fb := gwtest.Metric(t, m, metricname.RDMAVersionFallbacksTotal)
		if got != errVers || c1 != float64(v1) || fb != float64(fallbacks) ||
			gwtest.Metric(t, m, metricname.RDMAConnectionsByVersionTotal, "version", "2") != 0 {
			t.Fatalf("ERR_VERS %d, v1 connections %v, fallbacks %v; want %d, %d, %d", got, c1, fb, errVers, v1, fallbacks)
		}
	}
	client()
	state(0, 1, 0)

	next := *rev.Config()
	next.Backend.RDMAVersion = "auto"
	res, err := rev.Reconfigure(&next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.NewConnections, "backend.rdma_version") || len(res.NeedRestart) != 0 {
		t.Fatalf("reload result %+v: want backend.rdma_version for new connections", res)
	}
	client()
	state(1, 2, 1)
	client()
	state(1, 3, 1)
}
