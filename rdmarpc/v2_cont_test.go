package rdmarpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// contMsg encodes one version-two message: header h and payload.
func contMsg(t testing.TB, h *V2Header, payload []byte) []byte {
	t.Helper()
	b := make([]byte, h.EncodedLen()+len(payload))
	n, err := h.Encode(b)
	if err != nil {
		t.Fatalf("encode %v: %v", h, err)
	}
	copy(b[n:], payload)
	return b
}

// contFragments splits the Payload stream msg (its first word the XID)
// per plan and encodes every Send, the final one as final (whose header
// fields, chunk lists included, are kept).
func contFragments(t testing.TB, final *V2Header, msg []byte, recv int) [][]byte {
	t.Helper()
	p, err := PlanContinuation(len(msg), final.EncodedLen(), recv)
	if err != nil {
		t.Fatalf("plan %d bytes, header %d, recv %d: %v", len(msg), final.EncodedLen(), recv, err)
	}
	var out [][]byte
	for i := 0; i < p.Frags; i++ {
		off, end, rem := p.Fragment(i)
		if i == p.Frags-1 {
			out = append(out, contMsg(t, final, msg[off:end]))
			continue
		}
		var h V2Header
		h.Init(final.XID, final.Credit, ContMiddleType(final.HType))
		h.Remaining = rem
		out = append(out, contMsg(t, &h, msg[off:end]))
	}
	return out
}

// reassembly feeds messages to a Reassembler the way an engine does: it
// keeps the storage and copies fragments, and records every step.
type reassembly struct {
	r     Reassembler
	buf   []byte
	steps []ContStep
	done  [][]byte // complete Payload streams
	final []V2Header
}

func (a *reassembly) offer(t testing.TB, m []byte) ContStep {
	t.Helper()
	var h V2Header
	n, err := h.Decode(m, Limits{})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	st := a.r.Offer(&h, m[n:])
	a.steps = append(a.steps, st)
	p := m[n:]
	switch st.Verdict {
	case ContStart:
		a.buf = make([]byte, st.Total)
		fallthrough
	case ContAppend, ContComplete:
		if st.Off+len(p) > st.Total || len(a.buf) != st.Total {
			t.Fatalf("fragment [%d,+%d) outside %d bytes (storage %d)", st.Off, len(p), st.Total, len(a.buf))
		}
		copy(a.buf[st.Off:], p)
	}
	if st.Verdict == ContComplete {
		a.done = append(a.done, a.buf)
		var f V2Header
		f.CopyFrom(&h)
		a.final = append(a.final, f)
		a.buf = nil
	}
	if st.Abandoned {
		a.buf = nil
	}
	return st
}

func rpcStream(xid uint32, n int) []byte {
	b := patterned(n, int(xid))
	binary.BigEndian.PutUint32(b, xid)
	return b
}

func TestPlanContinuation(t *testing.T) {
	mid := V2MiddleHeaderSize
	for _, tc := range []struct {
		n, final, recv int
		frags          int
		err            error
	}{
		{n: 100, final: 32, recv: 132, frags: 1},
		{n: 101, final: 32, recv: 132, frags: 2},
		{n: 4096, final: 32, recv: 4096, frags: 2},
		{n: 8192, final: 32, recv: 1024, frags: 9},
		{n: 1024*1024 + 3, final: 100, recv: 4096, frags: 258},
		{n: 8, final: 28, recv: 28 + 3, err: ErrContFinalHeader},
		{n: 3, final: 28, recv: 30, err: ErrContFinalHeader},
		{n: 100, final: 20, recv: mid + 7, err: ErrContRecvSize},
	} {
		p, err := PlanContinuation(tc.n, tc.final, tc.recv)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("plan(%d, %d, %d): error %v, want %v", tc.n, tc.final, tc.recv, err, tc.err)
			}
			continue
		}
		if err != nil || p.Frags != tc.frags {
			t.Errorf("plan(%d, %d, %d) = %d fragments, %v; want %d", tc.n, tc.final, tc.recv, p.Frags, err, tc.frags)
			continue
		}
		checkPlan(t, p, tc.final, tc.recv)
	}
}

// checkPlan checks that the fragments tile [0, Len) in order, that every
// Send fits recv, that each carries at least the first word, that MIDDLE
// payloads are 4-aligned but for the last, and the rdma_remaining values.
func checkPlan(t testing.TB, p ContPlan, final, recv int) {
	t.Helper()
	next := 0
	for i := 0; i < p.Frags; i++ {
		off, end, rem := p.Fragment(i)
		hdr := V2MiddleHeaderSize
		if i == p.Frags-1 {
			hdr = final
			if rem != 0 {
				t.Fatalf("final fragment remaining %d", rem)
			}
		} else if int(rem) != p.Len-end {
			t.Fatalf("fragment %d remaining %d, want %d", i, rem, p.Len-end)
		}
		if off != next || end-off < contMinPayload || hdr+end-off > recv {
			t.Fatalf("plan %+v fragment %d = [%d,%d) after %d, header %d, recv %d", p, i, off, end, next, hdr, recv)
		}
		if i < p.Frags-2 && (end-off)%4 != 0 {
			t.Fatalf("MIDDLE fragment %d carries %d bytes", i, end-off)
		}
		next = end
	}
	if next != p.Len {
		t.Fatalf("fragments end at %d of %d", next, p.Len)
	}
}

// TestContRoundTrip splits calls and replies of many sizes with the
// codec's own headers, decodes every Send and reassembles: the stream and
// the final header come back as sent.
func TestContRoundTrip(t *testing.T) {
	for _, recv := range []int{64, 100, 1024, 4096} {
		for _, n := range []int{4, 5, 40, 63, 64, 65, 100, 1000, 1021, 1024, 4095, 4097, 10000, 65536 + 3} {
			for _, call := range []bool{true, false} {
				var final V2Header
				xid := uint32(n*7 + recv)
				if call {
					final.Init(xid, 33, HTypeCallInline)
					final.InvHandle = 0x77
					final.AppendWriteChunk(Segment{Handle: 0x77, Length: 8192, Offset: 1 << 40})
				} else {
					final.Init(xid, 33, HTypeReplyInline)
				}
				if final.EncodedLen()+contMinPayload > recv {
					continue
				}
				msg := rpcStream(xid, n)
				a := reassembly{r: Reassembler{Max: 1 << 20}}
				frags := contFragments(t, &final, msg, recv)
				for i, f := range frags {
					if len(f) > recv {
						t.Fatalf("recv %d n %d: Send %d is %d bytes", recv, n, i, len(f))
					}
					st := a.offer(t, f)
					want := ContAppend
					switch {
					case len(frags) == 1:
						want = ContPass
					case i == 0:
						want = ContStart
					case i == len(frags)-1:
						want = ContComplete
					}
					if st.Verdict != want {
						t.Fatalf("recv %d n %d call %v: fragment %d of %d: %v (%v), want %v", recv, n, call, i, len(frags), st.Verdict, st.Err, want)
					}
				}
				if len(frags) == 1 {
					continue
				}
				if len(a.done) != 1 || !bytes.Equal(a.done[0], msg) {
					t.Fatalf("recv %d n %d: reassembled stream differs", recv, n)
				}
				final.Credit = a.final[0].Credit
				if !a.final[0].Equal(&final) {
					t.Fatalf("final header %v, sent %v", &a.final[0], &final)
				}
				if _, ok := a.r.InProgress(); ok {
					t.Fatalf("sequence still in progress after its INLINE")
				}
			}
		}
	}
}

func middle(t testing.TB, xid uint32, typ HType, remaining uint32, payload []byte) []byte {
	var h V2Header
	h.Init(xid, 1, typ)
	h.Remaining = remaining
	return contMsg(t, &h, payload)
}

func inline(t testing.TB, xid uint32, typ HType, payload []byte) []byte {
	var h V2Header
	h.Init(xid, 1, typ)
	return contMsg(t, &h, payload)
}

// TestReassemblerBadSequences: every broken sequence gets its answer and
// the reassembler is ready for the next message afterwards.
func TestReassemblerBadSequences(t *testing.T) {
	const A, B = 0xa0a0a0a0, 0xb0b0b0b0
	w := func(x uint32) []byte { return put32s(x, 1, 2, 3) } // a first fragment of xid x
	d := func(n int) []byte { return patterned(n, 9) }       // later fragment data
	grant := func(t testing.TB) []byte { return inline(t, 0, HTypeGrant, nil) }
	type exp struct {
		v         ContVerdict
		reason    ContReason
		code      V2ErrCode
		abandoned uint32 // nonzero: the abandoned sequence's XID
	}
	pass, start, app, comp, disc := exp{v: ContPass}, exp{v: ContStart}, exp{v: ContAppend}, exp{v: ContComplete}, exp{v: ContDiscard}
	inval := func(r ContReason, ab uint32) exp { return exp{ContReject, r, V2ErrInvalCont, ab} }
	ext := func(t testing.TB, xid uint32) []byte {
		var h V2Header
		h.Init(xid, 1, HTypeCallExternal)
		h.AppendCallSegment(Segment{Handle: 1, Length: 100, Offset: 0})
		return contMsg(t, &h, nil)
	}
	for _, tc := range []struct {
		name string
		msgs func(t testing.TB) [][]byte
		want []exp
	}{
		{"interleaved xid", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 8, w(A)), middle(t, B, HTypeCallMiddle, 8, w(B)),
				inline(t, B, HTypeCallInline, d(8)), inline(t, A, HTypeCallInline, w(A))}
		}, []exp{start, inval(ContInterleaved, A), disc, pass}},
		{"interleaved single call", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 8, w(A)), inline(t, B, HTypeCallInline, w(B)),
				inline(t, B, HTypeCallInline, w(B))}
		}, []exp{start, inval(ContInterleaved, A), pass}},
		{"reply fragment in a call sequence", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 8, w(A)), inline(t, A, HTypeReplyInline, d(8))}
		}, []exp{start, inval(ContInterleaved, A)}},
		{"call fragment in a reply sequence", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeReplyMiddle, 8, w(A)), middle(t, A, HTypeCallMiddle, 4, d(4))}
		}, []exp{start, inval(ContInterleaved, A)}},
		{"external call breaks a sequence", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 8, w(A)), ext(t, B)}
		}, []exp{start, inval(ContInterleaved, A)}},
		{"property set breaks a sequence", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 8, w(A)), inline(t, 0, HTypeConnPropFinal, nil)}
		}, []exp{start, inval(ContInterleaved, A)}},
		{"grant passes through", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 12, w(A)), grant(t), middle(t, A, HTypeCallMiddle, 8, d(4)),
				inline(t, 0, HTypeError, put32s(uint32(V2ErrSystem))), inline(t, A, HTypeCallInline, d(8))}
		}, []exp{start, pass, app, pass, comp}},
		{"too large", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 1<<20, w(A)), middle(t, A, HTypeCallMiddle, 8, d(16)),
				inline(t, A, HTypeCallInline, d(8)), inline(t, B, HTypeCallInline, w(B))}
		}, []exp{inval(ContTooLarge, 0), disc, disc, pass}},
		{"remaining overflows 32 bits", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 0xffffffff, w(A))}
		}, []exp{inval(ContTooLarge, 0)}},
		{"middle remaining mismatch", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 32, w(A)), middle(t, A, HTypeCallMiddle, 20, d(8)),
				inline(t, A, HTypeCallInline, d(20)), inline(t, B, HTypeCallInline, w(B))}
		}, []exp{start, inval(ContRemaining, A), disc, pass}},
		{"middle consumes all", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 8, w(A)), middle(t, A, HTypeCallMiddle, 0, d(8))}
		}, []exp{start, inval(ContRemaining, A)}},
		{"final too short", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 12, w(A)), inline(t, A, HTypeCallInline, d(8)),
				middle(t, A, HTypeCallMiddle, 4, w(A)), inline(t, A, HTypeCallInline, d(4))}
		}, []exp{start, inval(ContRemaining, A), start, comp}},
		{"final too long", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 4, w(A)), inline(t, A, HTypeCallInline, d(8))}
		}, []exp{start, inval(ContRemaining, A)}},
		{"short tail", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 3, w(A)), inline(t, A, HTypeCallInline, d(4))}
		}, []exp{inval(ContShortTail, 0), disc}},
		{"short tail later", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 10, w(A)), middle(t, A, HTypeCallMiddle, 2, d(8))}
		}, []exp{start, inval(ContShortTail, A)}},
		{"first word not the xid", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeCallMiddle, 8, w(B)), middle(t, A, HTypeCallMiddle, 4, d(4)),
				inline(t, B, HTypeReplyInline, w(B))}
		}, []exp{{ContReject, ContFirstXID, V2ErrBadXDR, 0}, disc, pass}},
		{"discarding ends at another xid", func(t testing.TB) [][]byte {
			return [][]byte{middle(t, A, HTypeReplyMiddle, 1<<30, w(A)), middle(t, B, HTypeReplyMiddle, 4, w(B)),
				inline(t, B, HTypeReplyInline, d(4))}
		}, []exp{inval(ContTooLarge, 0), start, comp}},
		{"lone inline", func(t testing.TB) [][]byte {
			return [][]byte{inline(t, A, HTypeCallInline, w(A)), inline(t, A, HTypeReplyInline, w(A))}
		}, []exp{pass, pass}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := reassembly{r: Reassembler{Max: 4096}}
			msgs := tc.msgs(t)
			if len(msgs) != len(tc.want) {
				t.Fatalf("%d messages, %d expectations", len(msgs), len(tc.want))
			}
			for i, m := range msgs {
				st := a.offer(t, m)
				e := tc.want[i]
				if st.Verdict != e.v {
					t.Fatalf("message %d: %v (%v), want %v", i, st.Verdict, st.Err, e.v)
				}
				if e.v == ContReject {
					if st.Err == nil || st.Err.Reason != e.reason || st.Err.Code() != e.code {
						t.Fatalf("message %d: error %v, want reason %d code %v", i, st.Err, e.reason, e.code)
					}
					if st.Err.Error() == "" {
						t.Fatal("empty error text")
					}
				}
				if st.Abandoned != (e.abandoned != 0) || st.Abandoned && st.AbandonedXID != e.abandoned {
					t.Fatalf("message %d: abandoned %v 0x%x, want 0x%x", i, st.Abandoned, st.AbandonedXID, e.abandoned)
				}
			}
		})
	}
}

// TestReassemblerAllocatesNothing: the steady state (a sequence of three
// fragments) allocates nothing.
func TestReassemblerAllocatesNothing(t *testing.T) {
	var h1, h2, h3 V2Header
	h1.Init(5, 1, HTypeCallMiddle)
	h1.Remaining = 8
	h2.Init(5, 1, HTypeCallMiddle)
	h2.Remaining = 4
	h3.Init(5, 1, HTypeCallInline)
	p1, p := put32s(5, 1), put32s(9)
	r := Reassembler{Max: 100}
	allocs := testing.AllocsPerRun(100, func() {
		if r.Offer(&h1, p1).Verdict != ContStart || r.Offer(&h2, p).Verdict != ContAppend ||
			r.Offer(&h3, p).Verdict != ContComplete {
			panic("sequence refused")
		}
		if _, err := PlanContinuation(10000, 40, 1024); err != nil {
			panic(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per sequence", allocs)
	}
}

// FuzzV2Reassemble feeds arbitrary message sequences (each a 2-byte
// length and that many bytes) through Decode and a Reassembler: it never
// panics, never places a fragment outside its storage, never takes more
// than Max, completes only what the fragments carried, and a valid
// sequence planned by PlanContinuation after the noise still completes.
func FuzzV2Reassemble(f *testing.F) {
	seed := func(msgs ...[]byte) []byte {
		var b []byte
		for _, m := range msgs {
			b = append(b, byte(len(m)>>8), byte(len(m)))
			b = append(b, m...)
		}
		return b
	}
	f.Add(seed(middle(f, 1, HTypeCallMiddle, 8, put32s(1, 2)), inline(f, 1, HTypeCallInline, put32s(3, 4))))
	f.Add(seed(middle(f, 1, HTypeCallMiddle, 8, put32s(1, 2)), middle(f, 2, HTypeReplyMiddle, 4, put32s(2)),
		inline(f, 2, HTypeReplyInline, put32s(3))))
	f.Add(seed(middle(f, 3, HTypeReplyMiddle, 4000, put32s(3)), inline(f, 0, HTypeGrant, nil)))
	f.Fuzz(func(t *testing.T, in []byte) {
		a := reassembly{r: Reassembler{Max: 2048}}
		var h V2Header
		for len(in) >= 2 {
			n := int(in[0])<<8 | int(in[1])
			in = in[2:]
			if n > len(in) {
				n = len(in)
			}
			m := in[:n]
			in = in[n:]
			hl, err := h.Decode(m, Limits{})
			if err != nil {
				continue
			}
			st := a.r.Offer(&h, m[hl:])
			switch st.Verdict {
			case ContStart:
				if st.Total > a.r.Max || st.Off != 0 {
					t.Fatalf("start of %d bytes at %d, max %d", st.Total, st.Off, a.r.Max)
				}
				a.buf = make([]byte, st.Total)
				fallthrough
			case ContAppend, ContComplete:
				if a.buf == nil || st.Total != len(a.buf) || st.Off+len(m[hl:]) > st.Total {
					t.Fatalf("%v of %d bytes at %d outside storage %d/%d", st.Verdict, len(m[hl:]), st.Off, st.Total, len(a.buf))
				}
				copy(a.buf[st.Off:], m[hl:])
				if st.Verdict == ContComplete {
					if st.Off+len(m[hl:]) != st.Total {
						t.Fatalf("complete at %d+%d of %d", st.Off, len(m[hl:]), st.Total)
					}
					a.buf = nil
				}
			case ContReject:
				if st.Err == nil {
					t.Fatal("reject without an error")
				}
				_ = st.Err.Error()
			}
			if st.Abandoned {
				a.buf = nil
			}
			if xid, ok := a.r.InProgress(); ok != (a.buf != nil) {
				t.Fatalf("in progress %v (xid 0x%x) but storage %v", ok, xid, a.buf != nil)
			}
		}
		// After any noise a clean sequence goes through, at the latest
		// the second one: the first may be refused for breaking into a
		// sequence the noise left open (and is then discarded to its end).
		x := uint32(0x5eed)
		for {
			if xid, ok := a.r.InProgress(); (!ok || xid != x) && (!a.r.discarding || a.r.discardXID != x) {
				break
			}
			x++
		}
		open := a.buf != nil
		for k := uint32(0); k < 2; k++ {
			var final V2Header
			final.Init(x+k, 1, HTypeCallInline)
			msg := rpcStream(x+k, 700)
			a.done = nil
			for _, fr := range contFragments(t, &final, msg, 256) {
				a.offer(t, fr)
			}
			if (k == 1 || !open) && (len(a.done) != 1 || !bytes.Equal(a.done[0], msg)) {
				t.Fatalf("clean sequence %d after noise (open %v) not reassembled: %v", k, open, a.steps)
			}
		}
	})
}
