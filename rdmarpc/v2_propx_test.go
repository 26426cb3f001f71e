package rdmarpc

import (
	"encoding/binary"
	"errors"
	"testing"
)

// propMsg encodes a CONNPROP of type t with props (id, data) pairs.
func propMsg(t testing.TB, ht HType, credit uint32, props ...PropVal) []byte {
	t.Helper()
	var h V2Header
	h.Init(0, credit, ht)
	for _, p := range props {
		h.AppendProp(p.Which, p.Data)
	}
	b := make([]byte, h.EncodedLen())
	if _, err := h.Encode(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func u32prop(id PropID, v uint32) PropVal {
	return PropVal{Which: id, Data: binary.BigEndian.AppendUint32(nil, v)}
}

// feed decodes b and hands it to l: the decode error, else recv's.
func feed(l *v2Link, h *V2Header, b []byte) error {
	if _, err := h.Decode(b, Limits{}); err != nil {
		return err
	}
	return l.recv(h)
}

func testLink() *v2Link {
	l := new(v2Link)
	l.init(localProps(8192, 4096, 0, 0, RvrsDirSimple))
	return l
}

// The property exchange: defaults before anything, a FINAL sets the
// limits, MIDDLE then FINAL add up, unknown properties are ignored, a
// zero-length value restores the default.
func TestV2PropExchangeApplies(t *testing.T) {
	var h V2Header
	l := testLink()
	if got := l.limits(); got.SendMax != 4096 || got.RecvMax != 4096 || got.MaxSegmentCount != 16 ||
		got.MaxSegmentSize != DefaultPropMaxSegmentSize || got.ReverseDir != RvrsDirNone {
		t.Fatalf("limits before the exchange: %+v", got)
	}
	err := feed(l, &h, propMsg(t, HTypeConnPropMiddle, 9,
		u32prop(PropRecvBufSize, 65536), u32prop(99, 7), PropVal{Which: 1234, Data: []byte{1, 2, 3}}))
	if err != nil {
		t.Fatal(err)
	}
	if l.peerFinal || l.limits().SendMax != 4096 {
		t.Fatalf("a MIDDLE applied before its FINAL: %+v", l.limits())
	}
	err = feed(l, &h, propMsg(t, HTypeConnPropFinal, 10,
		u32prop(PropMaxSendSize, 2048), u32prop(PropMaxSegmentCount, 4), u32prop(PropMaxSegmentSize, 65536),
		u32prop(PropReverseDir, 77), PropVal{Which: PropMaxSegmentCount}))
	if err != nil {
		t.Fatal(err)
	}
	got := l.limits()
	want := v2Limits{SendMax: 8192, RecvMax: 2048, MaxSegmentSize: 65536, MaxSegmentCount: 16, ReverseDir: RvrsDirGenl}
	if got != want {
		t.Fatalf("limits %+v, want %+v", got, want)
	}
	if l.received != 2 || l.credit != 10 || !l.heard {
		t.Fatalf("counts: received %d credit %d heard %v", l.received, l.credit, l.heard)
	}
}

// Malformed known properties are BAD_PROPVAL (the codec's and the
// engine's checks) and none of the set is applied; a CONNPROP after the
// FINAL and a MIDDLE followed by a call are INVAL_CONT.
func TestV2PropExchangeErrors(t *testing.T) {
	var h V2Header
	for _, c := range []struct {
		name   string
		msgs   [][]byte
		code   V2ErrCode
		reason Reason
		index  int
	}{
		{"sbsiz of 2 bytes", [][]byte{propMsg(t, HTypeConnPropFinal, 4, u32prop(PropRecvBufSize, 65536), PropVal{Which: PropMaxSendSize, Data: []byte{0, 1}})},
			V2ErrBadPropVal, ReasonBadPropVal, 1},
		{"hostauth not an opaque", [][]byte{propMsg(t, HTypeConnPropFinal, 4, PropVal{Which: PropHostAuth, Data: []byte{0, 0, 0, 9}})},
			V2ErrBadPropVal, ReasonBadPropVal, 0},
		{"rbsiz below 1024", [][]byte{propMsg(t, HTypeConnPropFinal, 4, u32prop(PropRecvBufSize, 65536), u32prop(PropMaxSegmentCount, 2), u32prop(PropRecvBufSize, 1023))},
			V2ErrBadPropVal, ReasonBadPropVal, 2},
		{"sbsiz zero", [][]byte{propMsg(t, HTypeConnPropFinal, 4, u32prop(PropMaxSendSize, 0))},
			V2ErrBadPropVal, ReasonBadPropVal, 0},
		{"second final", [][]byte{propMsg(t, HTypeConnPropFinal, 4), propMsg(t, HTypeConnPropFinal, 4, u32prop(PropRecvBufSize, 65536))},
			V2ErrInvalCont, ReasonPropSequence, 1},
		{"middle after final", [][]byte{propMsg(t, HTypeConnPropFinal, 4), propMsg(t, HTypeConnPropMiddle, 4, u32prop(PropRecvBufSize, 65536))},
			V2ErrInvalCont, ReasonPropSequence, 1},
		{"middle then a call", [][]byte{propMsg(t, HTypeConnPropMiddle, 4, u32prop(PropRecvBufSize, 65536)), put32s(7, 2, 4, uint32(HTypeCallInline), 0, 0, 0, 0, 7)},
			V2ErrInvalCont, ReasonPropSequence, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := testLink()
			var err error
			for _, m := range c.msgs {
				if err = feed(l, &h, m); err != nil {
					break
				}
			}
			var ve *V2Error
			if !errors.As(err, &ve) || ve.Code != c.code || ve.Reason != c.reason || ve.Index != c.index || ve.Where != InProps {
				t.Fatalf("got %v, want %v/%v index %d", err, c.code, c.reason, c.index)
			}
			if got := l.limits(); got.SendMax != 4096 {
				t.Fatalf("properties of a rejected set applied: %+v", got)
			}
			var ans V2Header
			if !ans.SetErrorAnswer(err, 5, 1, 2) || ans.ErrBody.Code != c.code || ans.HType != HTypeError {
				t.Fatalf("no answer for %v", err)
			}
		})
	}
}

// Credits: one message until the peer's first; then the peer's
// rdma_credit bounds the Sent count, modulo 2^32; what this side writes is
// its Received count plus what it advertises.
func TestV2LinkCredits(t *testing.T) {
	l := testLink()
	if !l.mayPost() || l.allowance() != 1 {
		t.Fatal("a new connection may not post its first message")
	}
	var h V2Header
	l.buildProps(&h, 31)
	if h.HType != HTypeConnPropFinal || h.Credit != 31 || h.XID != 0 || h.EncodedLen() > V2FirstMessageMax {
		t.Fatalf("first message %v (%d bytes)", &h, h.EncodedLen())
	}
	if p := h.Properties(); p.MaxSendSize != 8192 || p.RecvBufSize != 4096 || p.ReverseDir != RvrsDirSimple {
		t.Fatalf("announced %+v", p)
	}
	l.posted()
	if l.mayPost() {
		t.Fatal("a second message before the peer's first")
	}
	// The peer grants 0 (its credit equals our Sent count), then GRANTs 3.
	l.recvCredit(1)
	if l.mayPost() || l.allowance() != 0 {
		t.Fatal("posting on a grant of 0")
	}
	l.recvCredit(4)
	for range 3 {
		if !l.mayPost() {
			t.Fatal("grant of 3 not usable")
		}
		l.posted()
	}
	if l.mayPost() {
		t.Fatal("a fourth message on a grant of 3")
	}
	l.unposted()
	if l.allowance() != 1 {
		t.Fatalf("allowance after unposting %d", l.allowance())
	}
	if c := l.creditFor(10); c != l.received+10 {
		t.Fatalf("credit written %d, want received %d + 10", c, l.received)
	}
	// Wrapping counts.
	l.sent, l.credit = 0xffffffff, 2
	if !l.mayPost() || l.allowance() != 3 {
		t.Fatalf("wrapped: may %v allowance %d", l.mayPost(), l.allowance())
	}
	if c := l.creditFor(1 << 40); c != l.received+V2CreditLimit-1 {
		t.Fatalf("advertised not capped: %d", c)
	}
}

func TestV2LinkRecvAllocatesNothing(t *testing.T) {
	var h V2Header
	b := propMsg(t, HTypeConnPropFinal, 4, u32prop(PropRecvBufSize, 65536), u32prop(PropMaxSendSize, 65536), u32prop(77, 1))
	l := testLink()
	n := testing.AllocsPerRun(100, func() {
		l.peerFinal = false
		if err := feed(l, &h, b); err != nil {
			t.Fatal(err)
		}
		_ = l.limits()
	})
	if n != 0 {
		t.Fatalf("%v allocations per exchange", n)
	}
}

// FuzzV2PropExchange feeds a sequence of messages (each preceded by a
// length byte) to a link: only the documented answers occur, a rejected
// set changes nothing, and the limits stay within what both sides allow.
func FuzzV2PropExchange(f *testing.F) {
	seq := func(msgs ...[]byte) []byte {
		var b []byte
		for _, m := range msgs {
			b = append(b, byte(len(m)))
			b = append(b, m...)
		}
		return b
	}
	f.Add(seq(propMsg(f, HTypeConnPropFinal, 4, u32prop(PropRecvBufSize, 65536))))
	f.Add(seq(propMsg(f, HTypeConnPropMiddle, 4, u32prop(PropMaxSendSize, 1024), u32prop(5, 2)), propMsg(f, HTypeConnPropFinal, 4, u32prop(9, 9))))
	f.Add(seq(propMsg(f, HTypeConnPropFinal, 4, PropVal{Which: PropHostAuth, Data: []byte{0, 0, 0, 1, 7, 0, 0, 0}}), put32s(0, 2, 9, uint32(HTypeGrant))))
	f.Add(seq(propMsg(f, HTypeConnPropMiddle, 4), put32s(1, 2, 9, uint32(HTypeReplyInline), 0, 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := testLink()
		var h V2Header
		for len(data) > 0 {
			n := min(int(data[0]), len(data)-1)
			msg := data[1 : 1+n]
			data = data[1+n:]
			before := l.peer
			final := l.peerFinal
			err := feed(l, &h, msg)
			var ve *V2Error
			var se *ShortError
			switch {
			case err == nil:
			case errors.As(err, &se):
				continue
			case !errors.As(err, &ve):
				t.Fatalf("undocumented error %T %v", err, err)
			case ve.Code == V2ErrInvalCont && ve.Reason != ReasonPropSequence,
				ve.Code == V2ErrBadPropVal && ve.Reason != ReasonBadPropVal && ve.Reason != ReasonTruncated:
				t.Fatalf("answer %v with reason %v", ve.Code, ve.Reason)
			}
			if err != nil && !samePropValues(l.peer, before) {
				t.Fatalf("a rejected message changed the peer's properties: %v", err)
			}
			if final && (h.HType == HTypeConnPropFinal || h.HType == HTypeConnPropMiddle) && err == nil {
				t.Fatal("a CONNPROP after the FINAL accepted")
			}
			lim := l.limits()
			if lim.SendMax < v2MinInline || lim.SendMax > 8192 || lim.RecvMax < v2MinInline || lim.RecvMax > 4096 ||
				lim.ReverseDir > RvrsDirGenl || l.peer.HostAuth != nil {
				t.Fatalf("limits out of bounds: %+v", lim)
			}
		}
	})
}

func samePropValues(a, b TransportProps) bool {
	return a.MaxSendSize == b.MaxSendSize && a.RecvBufSize == b.RecvBufSize && a.MaxSegmentSize == b.MaxSegmentSize &&
		a.MaxSegmentCount == b.MaxSegmentCount && a.ReverseDir == b.ReverseDir && a.Present == b.Present
}

func TestV2LinkGrantDue(t *testing.T) {
	l := testLink()
	l.creditFor(20) // granted: received 0 + 20
	for i := range 10 {
		if l.grantDue(20) {
			t.Fatalf("grant due after %d of 20", i)
		}
		l.recvCredit(1)
	}
	if !l.grantDue(20) {
		t.Fatal("no grant due with half the credit used")
	}
	l.creditFor(20)
	if l.grantDue(20) || l.grantDue(0) {
		t.Fatal("grant due right after granting")
	}
}
