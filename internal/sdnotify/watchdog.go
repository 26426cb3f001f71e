package sdnotify

import (
	"context"
	"errors"
	"time"
)

// Probe checks that the service is alive. It must return within ctx's
// deadline; one that does not counts as a failure (the service is
// wedged) and no new probe starts until it has returned.
type Probe func(ctx context.Context) error

// ErrProbeStalled: the previous probe has not returned yet.
var ErrProbeStalled = errors.New("sdnotify: liveness probe stalled")

// RunWatchdog pings n every timeout/2 (the interval sd_watchdog_enabled(3)
// recommends) for as long as probe succeeds, until ctx ends. A probe that
// fails or does not finish within timeout/2 withholds the ping, and
// failed (if not nil) is told why; after timeout without a ping systemd
// kills the service (WatchdogSec=, Restart=). It returns at once when
// timeout is 0 or n is nil.
func RunWatchdog(ctx context.Context, n *Notifier, timeout time.Duration, probe Probe, failed func(error)) {
	if timeout <= 0 || n == nil {
		return
	}
	every := timeout / 2
	var running chan error // the probe in progress, nil when none
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if running == nil {
			running = make(chan error, 1)
			pctx, cancel := context.WithTimeout(ctx, every)
			go func(done chan error) {
				defer cancel()
				done <- probe(pctx)
			}(running)
		}
		var err error
		select {
		case err = <-running:
			running = nil
			if err == nil {
				err = n.Watchdog()
			}
		case <-tick.C:
			err = ErrProbeStalled
		case <-ctx.Done():
			return
		}
		if err != nil && failed != nil {
			failed(err)
		}
		if running == nil {
			// The probe answered: wait out the rest of the period.
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}
}
