package gateway

import (
	"path/filepath"
	"time"
)

// ShutdownConfig is how the gateway stops (SIGTERM, `rdmagw drain`).
type ShutdownConfig struct {
	// DrainTimeout bounds a drain: the gateway stops accepting clients
	// and calls, waits up to this long for the calls in flight to be
	// answered, then disconnects every client (abandoning what is left,
	// counted in rdmagw_drain_abandoned_calls_total). 0 disconnects at
	// once. Keep systemd's TimeoutStopSec above it.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
}

// AdminConfig is the gateway's administrative endpoints.
type AdminConfig struct {
	// Socket is the path of a Unix socket (mode 0600) serving the live
	// view (`rdmagw sessions -s PATH`) and the drain command (`rdmagw
	// drain -s PATH`); "" turns it off.
	Socket string `yaml:"socket"`
}

// DefaultDrainTimeout is shutdown.drain_timeout's default: longer than
// any NFS call a filer answers normally, shorter than systemd's
// TimeoutStopSec in deploy/systemd.
const DefaultDrainTimeout = 30 * time.Second

// validateOps checks the shutdown and admin sections and metrics.sessions.
func (c *Config) validateOps(bad func(string, string, ...any)) {
	if d := c.Shutdown.DrainTimeout; d < 0 || d > time.Hour {
		bad("shutdown.drain_timeout", "must be between 0 and 1h (got %v)", d)
	}
	if s := c.Admin.Socket; s != "" && !filepath.IsAbs(s) {
		bad("admin.socket", "must be an absolute path (got %q)", s)
	}
	if c.Metrics.Sessions && c.Metrics.Listen == "" {
		bad("metrics.sessions", `needs metrics.listen (it is served there at /debug/sessions)`)
	}
}
