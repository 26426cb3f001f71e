package iwarp

import (
	"bytes"
	"testing"
)

// FuzzMPAFrame: any bytes either fail to decode or decode to a frame that
// encodes back to the same bytes.
func FuzzMPAFrame(f *testing.F) {
	for _, fr := range []mpaFrame{
		{Rev: 1},
		{CRC: true, Rev: 2, Enhanced: true, IRD: 16, ORD: 16, Private: []byte{0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3}},
		{Reply: true, Reject: true, Rev: 2, Enhanced: true, PeerToPeer: true, RTRRead: true},
	} {
		b, _ := appendMPAFrame(nil, &fr)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr mpaFrame
		n, err := decodeMPAFrame(b, &fr)
		if err != nil {
			return
		}
		// Reserved flag bits are not kept, and the S bit means nothing
		// under Rev 1: compare after normalising.
		want := append([]byte(nil), b[:n]...)
		want[16] &= mpaFlagMarkers | mpaFlagCRC | mpaFlagReject
		if fr.Enhanced {
			want[16] |= mpaFlagEnhanced
		}
		got, err := appendMPAFrame(nil, &fr)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", fr, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round trip\n%x\n%x", got, want)
		}
	})
}

// FuzzDDPSegment decodes a DDP header and, for Read Requests and
// Terminates, their payloads; encodings must round-trip.
func FuzzDDPSegment(f *testing.F) {
	b := make([]byte, 64)
	h := tagged(opWrite, 0x100, 0x7f0000001000)
	f.Add(b[:h.put(b)])
	u := untagged(opReadReq, qnReadReq, 1)
	u.Last = true
	n := u.put(b)
	(&readRequest{SinkSTag: 1, SinkTO: 2, Size: 3, SrcSTag: 4, SrcTO: 5}).put(b[n:])
	f.Add(append([]byte(nil), b[:n+readReqLen]...))
	tm := terminate{Layer: LayerDDP, EType: DDPUntaggedBuffer, Code: DDPUntaggedNoBuffer, HaveDDP: true, SegLen: 20, DDP: untagged(opSend, qnSend, 5)}
	u = untagged(opTerminate, qnTerminate, 1)
	n = u.put(b)
	n += tm.put(b[n:])
	f.Add(append([]byte(nil), b[:n]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h ddpHeader
		if err := h.parse(b); err != nil {
			return
		}
		out := make([]byte, ddpUntaggedLen)
		m := h.put(out)
		want := append([]byte(nil), b[:m]...)
		want[0] &= ddpFlagTagged | ddpFlagLast | ddpVersionMask
		if !bytes.Equal(out[:m], want) {
			t.Fatalf("header round trip %x -> %x", b[:m], out[:m])
		}
		_ = h.String()
		payload := b[m:]
		switch rdmapOpcode(h.RDMAP & rdmapOpcodeMask) {
		case opReadReq:
			var rr readRequest
			if rr.parse(payload) == nil {
				var o [readReqLen]byte
				rr.put(o[:])
				if !bytes.Equal(o[:], payload) {
					t.Fatal("read request round trip")
				}
			}
		case opTerminate:
			var tm terminate
			if tm.parse(payload) == nil {
				var o [termMaxLen]byte
				k := tm.put(o[:])
				var again terminate
				if err := again.parse(o[:k]); err != nil || again != tm {
					t.Fatalf("terminate round trip: %+v vs %+v (%v)", again, tm, err)
				}
				te := &TerminateError{Layer: tm.Layer, EType: tm.EType, Code: tm.Code}
				_ = te.Error()
				_ = te.status()
			}
		}
	})
}
