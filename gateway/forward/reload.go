package forward

import "github.com/rdmagw/rdmagw/gateway"

// connFields (forward mode) apply to client connections made after the
// reload: the engine's and the session's settings are taken per
// connection (Gateway.serveClient, Gateway.responderConfig), and the
// connection limits at each connection request (rdma.versions: the
// versions a new connection may settle on). Not rdma.credits,
// rdma.inline_recv, backchannel.max_calls nor backchannel.disabled: they
// set the receives of a connection, and the receive pool is sized for
// connections.max of them at start (openRecvPool).
var connFields = []string{"rdma.inline_send", "rdma.versions", "rdma.max_reads_outstanding", "rdma.limits.", "rdma.cut_through",
	"backchannel.queue", "backchannel.timeout",
	"backend.connect_timeout", "backend.reserved_source_port", "backend.reconnect_backoff_initial",
	"backend.reconnect_backoff_max", "backend.give_up_after", "backend.max_reply_bytes",
	"backend.ping_interval", "backend.ping_timeout", "backend.reconnect_grace",
	"connections.max", "connections.max_per_address", "connections.idle_timeout",
	"connections.reply_timeout", "connections.max_call_memory", "connections.max_reply_memory"}

// Reconfigure applies a new configuration (Reload above says what
// changes and when). next must be valid (LoadConfig validates it); an
// error changes nothing. It also counts the reload in
// rdmagw_config_reloads_total.
func (f *Gateway) Reconfigure(next *gateway.Config) (gateway.ReloadResult, error) {
	res, err := f.reload.Reconfigure(next, connFields, func(c *gateway.Config) { f.reload.ApplyLive(c, f.log, f.metrics) })
	return f.met.Reloaded(f.log, res, err, f.clients.OutsideAllowed(&f.reload))
}

// Config is the configuration in force (after the reloads so far).
func (f *Gateway) Config() *gateway.Config { return f.reload.Current() }
