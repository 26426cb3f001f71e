package rdmarpc

import (
	"context"
	"errors"
	"testing"
)

// On a version-two connection the backward direction works as in
// version one, in the v2 message forms: a backward call goes as
// RDMA2_CALL_INLINE (backwardHeaderSizeV2 bytes of header), the
// requester's REPLY_INLINE comes back to OnReply byte for byte, while
// forward calls with the same XIDs run alongside. Before this the
// responder had no backward direction on version two: NFSv4.1 callbacks
// through a reverse and a forward gateway speaking version two failed.
func TestBackchannelV2RoundTrip(t *testing.T) {
	o := pairOpts{}
	o.rcfg.V2 = true
	o.qcfg.Version = VersionV2
	bp := newBCPairOpts(t, 4, BackwardHandlerFunc(bcEcho), o)
	if bp.resp.Version() != V2Version || bp.req.Version() != V2Version {
		t.Fatalf("versions %d/%d, want 2", bp.resp.Version(), bp.req.Version())
	}
	var h V2Header
	h.Init(1, 1, HTypeCallInline)
	if n := h.EncodedLen(); n != backwardHeaderSizeV2 {
		t.Fatalf("CALL_INLINE without chunks is %d bytes, backwardHeaderSizeV2 %d", n, backwardHeaderSizeV2)
	}
	ctx := context.Background()
	max := bp.resp.BackchannelMax()
	if want := int(bp.resp.v2.sendMax.Load()) - backwardHeaderSizeV2; max != want || max <= 0 {
		t.Fatalf("BackchannelMax %d, want %d", max, want)
	}
	sizes := []int{8, 9, 100, 1000, max - 1, max}
	bp.sizes(t, ctx, sizes)
	if err := bp.resp.SendBackwardCall(ctx, [][]byte{bcCallMsg(99, max+1)}, true); !errors.Is(err, ErrBackchannelTooBig) {
		t.Fatalf("a call over BackchannelMax: %v", err)
	}
	bp.alongside(t, ctx, 16)
	if bp.rm.get("call") != len(sizes)+16 || bp.qm.get("reply") != len(sizes)+16 || bp.rm.get("unmatched") != 0 {
		t.Fatalf("metrics: responder %v requester %v", bp.rm.n, bp.qm.n)
	}
	if bp.resp.Outstanding() != 0 || bp.resp.BackchannelOutstanding() != 0 {
		t.Fatalf("outstanding forward %d backward %d", bp.resp.Outstanding(), bp.resp.BackchannelOutstanding())
	}
}

// A version-two requester that announced no Reverse-Direction Support
// (no backward credits) gets no backward call.
func TestBackchannelV2PeerWithout(t *testing.T) {
	o := pairOpts{}
	o.rcfg.V2 = true
	o.qcfg.Version = VersionV2
	o.qcfg.Backchannel.Credits = -1
	bp := newBCPairOpts(t, 4, BackwardHandlerFunc(bcEcho), o)
	if bp.req.bcLevel() != RvrsDirNone {
		t.Fatalf("the requester announces reverse-direction level %d without backward credits", bp.req.bcLevel())
	}
	if err := bp.resp.SendBackwardCall(context.Background(), [][]byte{bcCallMsg(1, 16)}, false); !errors.Is(err, ErrBackchannelOff) || bp.resp.BackchannelMax() != 0 {
		t.Fatalf("backward call to a requester without reverse-direction support: %v, max %d", err, bp.resp.BackchannelMax())
	}
}
