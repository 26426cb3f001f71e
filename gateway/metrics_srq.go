package gateway

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// Forward mode's receive buffers: the receive pool and, with
// rdma.srq_depth, the shared receive queue its buffers are posted on
// (gateway/forward/responder.go, rdmarpc/responder_srq.go).

// srqEvents counts the shared receive queue's low-water and empty events;
// it implements rdmarpc.SharedRecvMetrics.
type srqEvents struct{ low, empty prometheus.Counter }

func (e *srqEvents) SRQLowWater() { e.low.Inc() }
func (e *srqEvents) SRQEmpty()    { e.empty.Inc() }

// receiveSeries are registered once, by whichever of SharedRecvMetrics
// and RegisterReceives comes first.
type receiveSeries struct {
	once   sync.Once
	events srqEvents
}

func (m *Metrics) srqEvents() *srqEvents {
	m.recv.once.Do(func() {
		v := m.f.counterVec(metricname.SRQEventsTotal,
			"Shared receive queue events (rdma.srq_depth): low_water, fewer than srq_depth/8 receives left posted (calls in flight approach the depth); empty, none left: the next message from any client finds no buffer and its connection ends.", "event")
		m.recv.events = srqEvents{low: v.WithLabelValues("low_water"), empty: v.WithLabelValues("empty")}
	})
	return &m.recv.events
}

// SharedRecvMetrics is what a forward gateway's SharedRecv reports to.
func (m *Metrics) SharedRecvMetrics() rdmarpc.SharedRecvMetrics { return m.srqEvents() }

// RegisterReceives exports the receive pool's registered bytes and the
// shared receive queue's depth and posted receives (0 without one).
func (m *Metrics) RegisterReceives(p *rdmarpc.Pool, s *rdmarpc.SharedRecv) {
	m.srqEvents()
	srq := func(f func(*rdmarpc.SharedRecv) int) func() float64 {
		return func() float64 {
			if s == nil {
				return 0
			}
			return float64(f(s))
		}
	}
	m.f.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricname.RecvPoolBytesRegistered,
			Help: "Registered bytes of receive buffers (forward): connections x (rdma.credits + 8) x rdma.inline_recv as clients connect, or rdma.srq_depth x rdma.inline_recv with a shared receive queue."},
			func() float64 { return float64(p.Mapped()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricname.SRQDepth,
			Help: "Receives of the shared receive queue (rdma.srq_depth; 0: receives per connection)."},
			srq((*rdmarpc.SharedRecv).Depth)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: metricname.SRQPosted,
			Help: "Receives posted on the shared receive queue now: rdma.srq_depth less the calls holding one."},
			srq((*rdmarpc.SharedRecv).Posted)),
	)
}
