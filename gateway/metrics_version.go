package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// versionMetrics count the RPC-over-RDMA version each RDMA connection
// settles on (rdma.versions, backend.rdma_version; config_rdmaversion.go):
// two label values, resolved once.
type versionMetrics struct {
	conns     [3]prometheus.Counter // by version; [0] unused
	fallbacks prometheus.Counter
}

func newVersionMetrics(f factory) *versionMetrics {
	m := &versionMetrics{}
	byVers := f.counterVec(metricname.RDMAConnectionsByVersionTotal,
		"RDMA connections by the RPC-over-RDMA version they settled on (1, or 2: draft-ietf-nfsv4-rpcrdma-version-two-07). Forward: client connections, decided by each one's first message (rdma.versions); reverse: connections to the server (backend.rdma_version).", "version")
	m.conns[rdmarpc.Version] = byVers.WithLabelValues("1")
	m.conns[rdmarpc.V2Version] = byVers.WithLabelValues("2")
	m.fallbacks = f.counter(metricname.RDMAVersionFallbacksTotal,
		"Reverse mode: connections to the server that offered RPC-over-RDMA version two (backend.rdma_version auto) and continued in version one, the server having answered ERR_VERS or nothing; the address is then remembered, and later connections start in version one without a fallback.")
	return m
}

// VersionSettled implements rdmarpc.VersionMetrics for both modes.
func (m *versionMetrics) VersionSettled(v uint32, fellBack bool) {
	if int(v) < len(m.conns) && m.conns[v] != nil {
		m.conns[v].Inc()
	}
	if fellBack {
		m.fallbacks.Inc()
	}
}

var _ rdmarpc.VersionMetrics = (*engineMetrics)(nil)

// VersionSettled counts a client connection's version (forward mode).
func (m *engineMetrics) VersionSettled(v uint32, fellBack bool) { m.vers.VersionSettled(v, fellBack) }

// VersionSettled counts a connection to the server's version (reverse
// mode).
func (m *ReverseMetrics) VersionSettled(v uint32, fellBack bool) { m.vers.VersionSettled(v, fellBack) }

func (nopExtras) VersionSettled(uint32, bool) {}
