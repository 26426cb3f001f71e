package main

import (
	"context"
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
)

// drainNowGW is a gateway whose Drain ends Serve and returns at once: the
// drain's result and Serve's return are ready together, which a real
// gateway produces only by chance (its last session's end releases both;
// TestServeSIGTERMAnswersCallsInFlight failed in CI on it). The methods
// the loop does not call are left to the nil interface.
type drainNowGW struct {
	gatewayRunner
	res       gateway.DrainResult
	serveDone chan error
}

func (g *drainNowGW) Drain(context.Context) gateway.DrainResult {
	g.serveDone <- nil
	return g.res
}
func (g *drainNowGW) Config() *gateway.Config { return &gateway.Config{} }
func (g *drainNowGW) Status() string          { return "test" }
func (g *drainNowGW) Close() error            { return nil }

// The loop reports every drain's result (evDrained) before it returns,
// whichever of the two its select takes first: with both ready it picks
// at random, so 50 drains all reported means it does not depend on the
// pick (a loop that returned on Serve's end alone misses about half).
func TestLoopReportsDrainEndingWithServe(t *testing.T) {
	ev := watchEvents(t)
	for i := range 50 {
		serveDone := make(chan error, 1)
		gw := &drainNowGW{res: gateway.DrainResult{Clients: i + 1}, serveDone: serveDone}
		d := &daemon{gw: gw, log: hclog.NewNullLogger(), sigs: make(chan os.Signal, 1), drainReq: make(chan struct{}, 1)}
		d.drainReq <- struct{}{}
		if code := d.loop(serveDone, func() {}); code != 0 {
			t.Fatalf("drain %d: loop returned %d, want 0", i, code)
		}
		if got := ev.wait(t, evDrained).drain; got != gw.res {
			t.Fatalf("drain %d reported %+v, want %+v", i, got, gw.res)
		}
	}
}
