package reverse

import "github.com/rdmagw/rdmagw/gateway"

// reverseConnFields apply to the RDMA connections to the server made
// after the reload (a new client's, or a link's reconnection: rdmaLink.dial
// reads them from the configuration in force); the rest of reverse mode
// reads its settings from the gateway's one configuration throughout
// (restart to change them).
var reverseConnFields = []string{"backend.rdma_version"}

// Reconfigure is forward.Gateway.Reconfigure for reverse mode, where only the
// live fields change without a restart.
func (r *Gateway) Reconfigure(next *gateway.Config) (gateway.ReloadResult, error) {
	res, err := r.reload.Reconfigure(next, reverseConnFields, func(c *gateway.Config) { r.reload.ApplyLive(c, r.log, r.metrics) })
	return r.met.Metrics.Reloaded(r.log, res, err, r.clients.OutsideAllowed(&r.reload))
}

// Config is the configuration in force (after the reloads so far).
func (r *Gateway) Config() *gateway.Config { return r.reload.Current() }
