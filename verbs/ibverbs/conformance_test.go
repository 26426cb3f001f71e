//go:build ibverbs && cgo

package ibverbs

import (
	"testing"

	"github.com/Mellanox/rdmamap"
	"github.com/rdmagw/rdmagw/verbs/verbstest"
)

// quirks are the documented ways InfiniBand/RoCE differs from what the
// suite expects by default: the CM pads private data to the size of its
// message (56 bytes in a REQ, 196 in a REP, 148 in a REJ), and regions
// registered with ibv_reg_mr cannot be invalidated by a peer (only memory
// windows and fast-registration MRs can): a Send with Invalidate naming
// one fails at the receiver with a remote invalid request (rxe, mlx5).
var quirks = verbstest.Quirks{PrivateDataPadded: true, NoRemoteInvalidate: true}

// TestConformance runs the verbs conformance suite on the first RDMA
// device, or on the one serving RDMAGW_VERBS_ADDR (in the lab: the rxe
// interface's IP). It skips on hosts without RDMA devices.
func TestConformance(t *testing.T) {
	if len(rdmamap.GetRdmaDeviceList()) == 0 {
		t.Skip("no RDMA device on this host (the lab runs this test on soft-RoCE: make lab-verbs)")
	}
	verbstest.Run(t, verbstest.Factory{Provider: New(), Quirks: quirks})
}

func BenchmarkRDMA(b *testing.B) {
	if len(rdmamap.GetRdmaDeviceList()) == 0 {
		b.Skip("no RDMA device on this host")
	}
	verbstest.Bench(b, verbstest.Factory{Provider: New()})
}
