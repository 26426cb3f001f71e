package gateway_test

import (
	"testing"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/gateway/metricname"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// The engines' work request reports land in rdmagw_rdma_work_requests_total
// by path: each message's Send, the further Sends of a continued message,
// GRANTs, and the RDMA Reads and Writes (forward: the responder) or the
// registrations exposing a call's chunks (reverse: the requester).
func TestMetricsWorkRequests(t *testing.T) {
	fm := gateway.NewMetrics()
	e := fm.ResponderMetrics()
	e.ReplySent(rdmarpc.ReplyInline, 100, 4096)
	e.(rdmarpc.WorkMetrics).Posted(rdmarpc.WorkWriteChunk, 1)
	e.ReplySent(rdmarpc.ReplyReplyChunk, 40, 9000)
	e.(rdmarpc.WorkMetrics).Posted(rdmarpc.WorkReplyChunk, 3)
	e.(rdmarpc.WorkMetrics).Posted(rdmarpc.WorkLongCall, 1)
	e.(rdmarpc.WorkMetrics).Posted(rdmarpc.WorkReadChunk, 2)
	v2 := e.(rdmarpc.ResponderV2Metrics)
	e.ReplySent(rdmarpc.ReplyInline, 9000, 0)
	v2.V2Continued(false, 3)
	v2.V2Continued(true, 5) // the peer's Sends
	v2.V2GrantSent()

	rm := gateway.NewReverseMetrics()
	rm.CallSent(rdmarpc.CallInline, 20000, 0)
	rm.V2Continued(false, 4)
	rm.V2Continued(true, 7)
	rm.V2GrantSent()
	rm.V2GrantSent()
	rm.Posted(rdmarpc.WorkRegistration, 2)

	for _, c := range []struct {
		mode string
		m    *gateway.Metrics
		path string
		want float64
	}{
		{"forward", fm, "send", 3}, {"forward", fm, "continuation", 2}, {"forward", fm, "grant", 1},
		{"forward", fm, "read_chunk", 2}, {"forward", fm, "long_call", 1},
		{"forward", fm, "write_chunk", 1}, {"forward", fm, "reply_chunk", 3},
		{"reverse", rm.Metrics, "send", 1}, {"reverse", rm.Metrics, "continuation", 3},
		{"reverse", rm.Metrics, "grant", 2}, {"reverse", rm.Metrics, "read_chunk", 0},
		{"reverse", rm.Metrics, "registration", 2}, {"forward", fm, "registration", 0},
	} {
		if got := gwtest.Metric(t, c.m, metricname.RDMAWorkRequestsTotal, "path", c.path); got != c.want {
			t.Errorf("%s path %s: %v work requests, want %v", c.mode, c.path, got, c.want)
		}
	}
}
