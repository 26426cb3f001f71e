// Package gwstats reads a gateway's Prometheus registry back into plain
// numbers for the `rdmagw demo` and `bench` summaries and for tests that
// check which RPC-over-RDMA path the bytes took.
package gwstats

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmagw/rdmagw/gateway/metricname"
)

// Path is one series of rdmagw_bytes_total.
type Path struct {
	Path      string // inline, read_chunk, write_chunk, reply_chunk, long_call
	Direction string // in (from clients) or out (to clients)
	Bytes     float64
}

// Snapshot is what the summaries show.
type Snapshot struct {
	Paths        []Path  // sorted by path, then direction
	Calls        float64 // rdmagw_calls_total over all procedures
	ErrVersChunk float64 // RDMA_ERROR answers sent
	PoolInUse    float64 // registered memory handed out and not given back
	// Work is rdmagw_rdma_work_requests_total by path (send,
	// continuation, grant, read_chunk, long_call, write_chunk,
	// reply_chunk); nil before the first.
	Work map[string]float64
}

// Bytes returns the bytes of path/direction (0 if never seen).
func (s *Snapshot) Bytes(path, direction string) float64 {
	for _, p := range s.Paths {
		if p.Path == path && p.Direction == direction {
			return p.Bytes
		}
	}
	return 0
}

// Take gathers g.
func Take(g prometheus.Gatherer) (Snapshot, error) {
	var s Snapshot
	fams, err := g.Gather()
	if err != nil {
		return s, err
	}
	for _, f := range fams {
		switch f.GetName() {
		case metricname.BytesTotal:
			for _, m := range f.GetMetric() {
				p := Path{Bytes: m.GetCounter().GetValue()}
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "path":
						p.Path = l.GetValue()
					case "direction":
						p.Direction = l.GetValue()
					}
				}
				s.Paths = append(s.Paths, p)
			}
		case metricname.CallsTotal:
			for _, m := range f.GetMetric() {
				s.Calls += m.GetCounter().GetValue()
			}
		case metricname.RDMAErrorsSentTotal:
			for _, m := range f.GetMetric() {
				s.ErrVersChunk += m.GetCounter().GetValue()
			}
		case metricname.RDMAWorkRequestsTotal:
			s.Work = map[string]float64{}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "path" {
						s.Work[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		case metricname.PoolBytesInUse:
			for _, m := range f.GetMetric() {
				s.PoolInUse += m.GetGauge().GetValue()
			}
		}
	}
	sort.Slice(s.Paths, func(i, j int) bool {
		if s.Paths[i].Path != s.Paths[j].Path {
			return s.Paths[i].Path < s.Paths[j].Path
		}
		return s.Paths[i].Direction < s.Paths[j].Direction
	})
	return s, nil
}
