package rdmarpc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Message continuation of version two (draft-ietf-nfsv4-rpcrdma-version-
// two-07, "Continued Format", RDMA2_CALL_MIDDLE and RDMA2_REPLY_MIDDLE):
// an RPC message whose Payload stream does not fit the peer's receive
// buffer travels as several Sends, MIDDLE fragments first, then the
// INLINE one that carries the chunk lists and the rest of the stream. The
// sender never interleaves the Payload streams of two messages.
//
// This file is the part both engines share and is independent of them:
// PlanContinuation splits an outgoing Payload stream, Reassembler checks
// an incoming sequence and says where each fragment goes. Neither touches
// memory of its own: the engine copies the bytes (into a pool buffer it
// took for Total bytes) and sends the fragments.
//
// Positions taken where the draft is loose (doc.go lists them too):
//
//   - rdma_remaining counts the Payload bytes that follow the fragment
//     carrying it (in later fragments), so the first fragment tells the
//     receiver the whole size (its own length plus rdma_remaining) and the
//     final INLINE fragment carries exactly the last MIDDLE's
//     rdma_remaining. The receiver checks every fragment against that and
//     answers a mismatch with RDMA2_ERR_INVAL_CONT.
//   - Every fragment carries at least the four bytes the XDR calls
//     rdma_rpc_first_word; the first fragment's first word is the RPC
//     message's XID and must equal rdma_xid (else RDMA2_ERR_BAD_XDR, the
//     draft's "XDR Errors"); later fragments' first words are just data.
//   - A sequence is broken by any MIDDLE or INLINE of another XID or of
//     the other direction, by an EXTERNAL type and by a CONNPROP type:
//     they all carry a stream of their own. The breaking message is
//     answered with RDMA2_ERR_INVAL_CONT and dropped ("drop the incoming
//     message without processing it further"), and the sequence it broke
//     is abandoned and answered with RDMA2_ERR_INVAL_CONT too, so that
//     its transaction completes instead of hanging. RDMA2_GRANT and
//     RDMA2_ERROR carry no Payload stream and pass through a sequence
//     without breaking it (the framing rule forbids interleaving Payload
//     streams; a GRANT is what a peer sends while the other side waits).
//   - After an RDMA2_ERR_INVAL_CONT for a MIDDLE, further fragments with
//     its XID are discarded silently up to and including its INLINE, or
//     until a message with another XID arrives.
//   - A sequence whose whole size exceeds the receiver's bound (Max) is
//     refused at its first fragment with RDMA2_ERR_INVAL_CONT.

// ContPlan is how one outgoing Payload stream is split. Fragment i <
// Frags-1 is a MIDDLE fragment, the last one the INLINE (or final)
// message; Frags == 1 means no continuation.
type ContPlan struct {
	Len    int // Payload stream bytes
	Frags  int // Sends in all, the final one included
	middle int // Payload bytes of each MIDDLE fragment but maybe the last
	split  int // Payload bytes in MIDDLE fragments (the final one starts here)
}

// Errors of PlanContinuation.
var (
	ErrContFinalHeader = errors.New("rdmarpc: v2 continuation: the final header leaves no room for the RPC message's first word")
	ErrContRecvSize    = errors.New("rdmarpc: v2 continuation: the peer's receive size is too small for a MIDDLE fragment")
)

// contMinPayload is the least Payload a fragment carries: the XDR's
// rdma_rpc_first_word.
const contMinPayload = 4

// PlanContinuation splits a Payload stream of n bytes for a peer whose
// receive buffers hold recv bytes, the final fragment's header (the
// INLINE type with its chunk lists) being final bytes long. It fills the
// MIDDLE fragments (V2MiddleHeaderSize of header each) with as much as
// fits, rounded down to a multiple of 4, and leaves the final fragment
// the rest, at least 4 bytes.
func PlanContinuation(n, final, recv int) (ContPlan, error) {
	p := ContPlan{Len: n, Frags: 1, split: 0}
	if final+n <= recv {
		return p, nil
	}
	room := recv - final // the final fragment's Payload room
	if room < contMinPayload || n < contMinPayload {
		return ContPlan{}, fmt.Errorf("%w: %d bytes of header, receive size %d", ErrContFinalHeader, final, recv)
	}
	p.middle = (recv - V2MiddleHeaderSize) &^ 3
	if p.middle < 2*contMinPayload {
		return ContPlan{}, fmt.Errorf("%w: %d", ErrContRecvSize, recv)
	}
	mids := (n - room + p.middle - 1) / p.middle
	last := n - mids*p.middle
	if last < contMinPayload {
		last = contMinPayload // the last MIDDLE gives up what the final needs
	}
	p.split = n - last
	p.Frags = mids + 1
	return p, nil
}

// Fragment returns the Payload range [off, end) of fragment i and, for a
// MIDDLE fragment, its rdma_remaining (the bytes after end).
func (p ContPlan) Fragment(i int) (off, end int, remaining uint32) {
	if i >= p.Frags-1 {
		return p.split, p.Len, 0
	}
	off = i * p.middle
	end = min(off+p.middle, p.split)
	return off, end, uint32(p.Len - end)
}

// ContMiddleType is the MIDDLE header type that precedes final (an INLINE
// type); final itself for any other type.
func ContMiddleType(final HType) HType {
	switch final {
	case HTypeCallInline:
		return HTypeCallMiddle
	case HTypeReplyInline:
		return HTypeReplyMiddle
	}
	return final
}

// ContVerdict is what Reassembler.Offer says to do with a message.
type ContVerdict uint8

const (
	// ContPass: the message is not part of a continuation; handle it as
	// a whole message.
	ContPass ContVerdict = iota
	// ContStart: the first fragment of a sequence: take storage for
	// Total bytes and copy the fragment's Payload to offset 0.
	ContStart
	// ContAppend: copy the fragment's Payload to Off.
	ContAppend
	// ContComplete: copy the final fragment's Payload to Off; the
	// message's Payload stream (Total bytes) is complete, and the final
	// fragment's header (chunk lists, rdma_inv_handle) is the message's.
	ContComplete
	// ContDiscard: drop the message silently (a later fragment of a
	// sequence already answered with RDMA2_ERR_INVAL_CONT).
	ContDiscard
	// ContReject: drop the message and answer it with an RDMA2_ERROR
	// whose code is Err.Code (INVAL_CONT, or BAD_XDR for a first
	// fragment whose first word is not rdma_xid).
	ContReject
)

var contVerdictText = [...]string{"pass", "start", "append", "complete", "discard", "reject"}

func (v ContVerdict) String() string {
	if int(v) < len(contVerdictText) {
		return contVerdictText[v]
	}
	return fmt.Sprintf("ContVerdict(%d)", uint8(v))
}

// ContReason says what was wrong with a continuation sequence.
type ContReason uint8

const (
	ContInterleaved ContReason = iota + 1 // another message broke into the sequence
	ContTooLarge                          // the whole size exceeds the bound
	ContRemaining                         // rdma_remaining disagrees with the bytes received
	ContShortTail                         // rdma_remaining too small for the final fragment's first word
	ContFirstXID                          // the first fragment's first word is not rdma_xid
)

var contReasonText = map[ContReason]string{
	ContInterleaved: "another message interleaved with a continued message",
	ContTooLarge:    "continued message larger than the reassembly bound",
	ContRemaining:   "rdma_remaining disagrees with the fragments received",
	ContShortTail:   "rdma_remaining leaves the final fragment no first word",
	ContFirstXID:    "rdma_xid differs from the RPC message's XID in the first fragment",
}

// ContError is a continuation sequence the receiver refuses: the message
// (XID, HType) that is answered, why, and the numbers involved.
type ContError struct {
	XID    uint32
	HType  HType
	Reason ContReason
	// Seq is the XID of the sequence in progress (for ContInterleaved).
	Seq  uint32
	Got  uint64 // the offending value (bytes, rdma_remaining, first word)
	Want uint64 // what was expected, or the bound
}

func (e *ContError) Error() string {
	s := fmt.Sprintf("rdmarpc: v2 continuation: xid 0x%08x %v: %s", e.XID, e.HType, contReasonText[e.Reason])
	switch e.Reason {
	case ContInterleaved:
		s += fmt.Sprintf(" (sequence of xid 0x%08x in progress)", e.Seq)
	case ContTooLarge:
		s += fmt.Sprintf(": %d > %d", e.Got, e.Want)
	case ContRemaining, ContShortTail:
		s += fmt.Sprintf(": %d, expected %d", e.Got, e.Want)
	case ContFirstXID:
		s += fmt.Sprintf(": 0x%08x", e.Got)
	}
	return s + " (" + e.Code().String() + ")"
}

// Code is the RDMA2_ERROR answer the refused message is owed.
func (e *ContError) Code() V2ErrCode {
	if e.Reason == ContFirstXID {
		return V2ErrBadXDR
	}
	return V2ErrInvalCont
}

// ContStep is Reassembler.Offer's answer.
type ContStep struct {
	Verdict ContVerdict
	Off     int // where the fragment's Payload goes (Start, Append, Complete)
	Total   int // the message's whole Payload stream (Start, Append, Complete)
	// Err says why, for ContReject.
	Err *ContError
	// Abandoned: the sequence in progress (of XID AbandonedXID, a call
	// when AbandonedCall) ended with this rejected message: release its
	// storage. When AbandonedXID differs from Err.XID (another message
	// broke into it) answer it with RDMA2_ERR_INVAL_CONT too, so that its
	// transaction completes; else the one answer to Err covers both.
	Abandoned     bool
	AbandonedXID  uint32
	AbandonedCall bool
}

// Reassembler follows the continuation sequences one peer sends on a
// connection: at most one at a time, calls (CALL_MIDDLE ... CALL_INLINE)
// and replies (REPLY_MIDDLE ... REPLY_INLINE) alike. It checks and
// places; the caller copies. The zero value is ready once Max is set;
// Offer allocates nothing.
type Reassembler struct {
	// Max bounds a reassembled Payload stream in bytes (0: no sequence is
	// accepted).
	Max int

	active    bool
	call      bool // the sequence is a call
	xid       uint32
	total     int
	got       int
	remaining uint32 // the last MIDDLE's rdma_remaining

	discarding bool
	discardXID uint32
}

// InProgress reports whether a sequence is being reassembled, and its XID.
func (r *Reassembler) InProgress() (uint32, bool) { return r.xid, r.active }

// Reset forgets any sequence (the connection ended, or the caller gave
// up on the one in progress and released its storage).
func (r *Reassembler) Reset() { *r = Reassembler{Max: r.Max} }

// Abort ends the sequence in progress on the receiver's own account (it
// found no memory for it, say) and discards the rest of its fragments up
// to its INLINE, as after a refused MIDDLE; the caller answers it.
func (r *Reassembler) Abort() {
	if r.active {
		r.active = false
		r.discarding, r.discardXID = true, r.xid
	}
}

// Offer examines one message that V2Header.Decode accepted: h its header
// and payload the bytes after the header (for MIDDLE and INLINE types the
// fragment's Payload, at least 4 bytes). The caller acts on the verdict;
// for Start, Append and Complete it must copy payload to Off of the
// Total-byte storage before it offers the next message.
func (r *Reassembler) Offer(h *V2Header, payload []byte) ContStep {
	t := h.HType
	if t == HTypeGrant || t == HTypeError {
		return ContStep{Verdict: ContPass}
	}
	if r.discarding {
		if (t == HTypeCallMiddle || t == HTypeReplyMiddle) && h.XID == r.discardXID {
			return ContStep{Verdict: ContDiscard}
		}
		if (t == HTypeCallInline || t == HTypeReplyInline) && h.XID == r.discardXID {
			r.discarding = false
			return ContStep{Verdict: ContDiscard}
		}
		r.discarding = false
	}
	if r.active {
		return r.next(h, len(payload))
	}
	if t == HTypeCallMiddle || t == HTypeReplyMiddle {
		return r.start(h, payload)
	}
	return ContStep{Verdict: ContPass}
}

// start begins a sequence with its first MIDDLE fragment.
func (r *Reassembler) start(h *V2Header, payload []byte) ContStep {
	n := len(payload)
	total := uint64(n) + uint64(h.Remaining)
	switch {
	case n >= 4 && binary.BigEndian.Uint32(payload) != h.XID:
		return r.reject(h, ContFirstXID, uint64(binary.BigEndian.Uint32(payload)), uint64(h.XID))
	case total > uint64(max(r.Max, 0)):
		return r.reject(h, ContTooLarge, total, uint64(max(r.Max, 0)))
	case h.Remaining < contMinPayload:
		return r.reject(h, ContShortTail, uint64(h.Remaining), contMinPayload)
	}
	r.active, r.call, r.xid = true, h.HType == HTypeCallMiddle, h.XID
	r.total, r.got, r.remaining = int(total), n, h.Remaining
	return ContStep{Verdict: ContStart, Off: 0, Total: r.total}
}

// next continues (or breaks) the sequence in progress with h.
func (r *Reassembler) next(h *V2Header, n int) ContStep {
	mid, fin := HTypeReplyMiddle, HTypeReplyInline
	if r.call {
		mid, fin = HTypeCallMiddle, HTypeCallInline
	}
	if h.XID != r.xid || (h.HType != mid && h.HType != fin) {
		st := r.reject(h, ContInterleaved, 0, 0)
		st.Err.Seq = r.xid
		st.Abandoned, st.AbandonedXID, st.AbandonedCall = true, r.xid, r.call
		r.active = false
		return st
	}
	off := r.got
	if h.HType == fin {
		if uint64(n) != uint64(r.remaining) {
			return r.abandon(h, ContRemaining, uint64(n), uint64(r.remaining))
		}
		r.active = false
		return ContStep{Verdict: ContComplete, Off: off, Total: r.total}
	}
	switch {
	case uint64(n) >= uint64(r.remaining) || h.Remaining != r.remaining-uint32(n):
		return r.abandon(h, ContRemaining, uint64(h.Remaining), uint64(r.remaining)-min(uint64(n), uint64(r.remaining)))
	case h.Remaining < contMinPayload:
		return r.abandon(h, ContShortTail, uint64(h.Remaining), contMinPayload)
	}
	r.got += n
	r.remaining = h.Remaining
	return ContStep{Verdict: ContAppend, Off: off, Total: r.total}
}

// abandon refuses a fragment of the sequence in progress (same XID): the
// sequence ends with it, and its storage goes (Abandoned, same XID: one
// answer is owed, for this message).
func (r *Reassembler) abandon(h *V2Header, why ContReason, got, want uint64) ContStep {
	r.active = false
	st := r.reject(h, why, got, want)
	st.Abandoned, st.AbandonedXID, st.AbandonedCall = true, r.xid, r.call
	return st
}

// reject refuses h; after a refused MIDDLE the rest of its sequence is
// discarded silently.
func (r *Reassembler) reject(h *V2Header, why ContReason, got, want uint64) ContStep {
	if h.HType == HTypeCallMiddle || h.HType == HTypeReplyMiddle {
		r.discarding, r.discardXID = true, h.XID
	}
	return ContStep{Verdict: ContReject, Err: &ContError{XID: h.XID, HType: h.HType, Reason: why, Got: got, Want: want}}
}
