package rdmarpc

import (
	"encoding/binary"
)

// The version-two state both engines keep per connection: the transport
// property exchange, the limits it sets, and the credit accounting
// (draft-ietf-nfsv4-rpcrdma-version-two-07, "Transport Properties",
// "Flow Control", "Initial Connection State"). v2Link is pure: it sees
// decoded headers and counts, and the engine posts what it builds.
//
// The exchange, as both engines run it:
//
//	requester                               responder
//	    | CONNPROP_FINAL xid 0, its props       |  the requester's first
//	    | ------------------------------------> |  message, <= 1024 octets
//	    |            CONNPROP_FINAL xid 0, props |  the responder answers
//	    | <------------------------------------ |  only after it: a v1
//	    |   calls ...                           |  client must never see v2
//
// Until the peer's first message has come, a side may have only one
// message outstanding: the Received credits start at 1 and the first
// message uses it (V2MayPost), so the rule needs no code of its own.
//
// Properties: a set is checked whole before any of it is applied (BAD_PROPVAL
// discards the message "without applying any of its property settings");
// unknown properties are ignored; a later CONNPROP_MIDDLE/FINAL adds to
// what earlier ones of the same sequence set; a CONNPROP after the peer's
// FINAL, or a CONNPROP_MIDDLE followed by anything but another CONNPROP,
// is RDMA2_ERR_INVAL_CONT. Positions where the draft is silent:
//
//   - A Maximum Send Size or Receive Buffer Size below 1024 octets (the
//     smallest inline threshold RFC 8166 allows, and the bound the draft
//     puts on a first message) is BAD_PROPVAL: no message that carries a
//     call could be sent.
//   - A Reverse-Direction Support level above GENL is taken as GENL.
//   - Host authentication material is not kept (the connection stays
//     unauthenticated; local policy lets it continue).
//
// Credits: the rdma_credit a peer writes bounds the Sent count of the side
// that receives it (V2MayPost(sent, received)). Written literally, "the
// sum of the connection's Sent message count and Advertised credits" ties
// the bound to the writer's own sends, which grants too much when the
// writer sends more than it receives (GRANT, reverse calls, a reply in
// fragments) and too little the other way. v2Link writes the sum of its
// Received message count and its Advertised credits (receives posted and
// free, less the one kept for a GRANT): what the other side's Sent count
// may reach. For one reply per call the two readings differ only by the
// calls being served.

// v2MinInline is the smallest Maximum Send Size and Receive Buffer Size a
// peer may announce: version one's smallest inline threshold.
const v2MinInline = V2FirstMessageMax

// v2Limits are a connection's limits once both property sets are known.
type v2Limits struct {
	// SendMax is the largest message this side sends in one Send: its own
	// Maximum Send Size and the peer's Receive Buffer Size.
	SendMax int
	// RecvMax is the largest message the peer sends: its Maximum Send
	// Size and this side's Receive Buffer Size.
	RecvMax int
	// MaxSegmentSize is the largest segment either side handles.
	MaxSegmentSize int
	// MaxSegmentCount is the most segments a Requester's header may
	// carry: the responder's value (on a requester, the peer's).
	MaxSegmentCount int
	// ReverseDir is the peer's Reverse-Direction Support (RvrsDir*).
	ReverseDir uint32
}

// v2Link is one connection's version-two state. Not safe for concurrent
// use: the engine guards it with its own lock.
type v2Link struct {
	local TransportProps // what this side announces
	peer  TransportProps // what the peer announced, defaults filled in

	sent     uint32 // Sent message count
	received uint32 // Received message count
	credit   uint32 // Received credits: rdma_credit of the last message
	written  uint32 // the last rdma_credit this side wrote

	heard      bool // a version-two message from the peer has come
	peerMiddle bool // a CONNPROP_MIDDLE sequence is open
	peerFinal  bool // the peer's CONNPROP_FINAL has come
	pending    TransportProps
}

// init resets l for a new connection announcing local.
func (l *v2Link) init(local TransportProps) {
	local.HostAuth = nil
	*l = v2Link{local: local, peer: DefaultTransportProps(), credit: V2InitialReceivedCredits}
}

// localProps are the properties an engine announces: its largest Send,
// its receive buffer size, its segment limits and reverse-direction level.
func localProps(sendMax, recvSize, maxSegSize, maxSegCount int, rvrs uint32) TransportProps {
	p := DefaultTransportProps()
	p.MaxSendSize, p.RecvBufSize = uint32(sendMax), uint32(recvSize)
	if maxSegSize > 0 {
		p.MaxSegmentSize = uint32(maxSegSize)
	}
	if maxSegCount > 0 {
		p.MaxSegmentCount = uint32(maxSegCount)
	}
	p.ReverseDir = rvrs
	return p
}

// credit is the rdma_credit to write now, advertising adv more messages
// (capped below V2CreditLimit).
func (l *v2Link) creditFor(adv int) uint32 {
	l.written = V2Credit(l.received, uint32(min(max(adv, 0), V2CreditLimit-1)))
	return l.written
}

// grantDue reports whether this side should send an RDMA2_GRANT now: what
// it last granted leaves the peer at most half of adv more messages (the
// draft: "a credit refresh before half its credit limit is exceeded"),
// and granting adv now would give it more.
func (l *v2Link) grantDue(adv int) bool {
	left := int(int32(l.written - l.received))
	return adv > 0 && left <= adv/2 && left < adv
}

// mayPost reports whether one more message may be posted now.
func (l *v2Link) mayPost() bool { return V2MayPost(l.sent, l.credit) }

// allowance is how many more messages may be posted now (0 or more).
func (l *v2Link) allowance() int { return max(int(int32(l.credit-l.sent)), 0) }

// posted counts a message posted; unposted takes back one counted but
// never posted (a call that failed to marshal after taking its credit).
func (l *v2Link) posted()   { l.sent++ }
func (l *v2Link) unposted() { l.sent-- }

// buildProps makes h this side's RDMA2_CONNPROP_FINAL (xid 0),
// advertising adv messages.
func (l *v2Link) buildProps(h *V2Header, adv int) {
	h.Init(0, l.creditFor(adv), HTypeConnPropFinal)
	h.AppendTransportProps(l.local)
}

// recvCredit counts a received version-two message whose prefix decoded
// and takes its credit. Every message does, whatever its body.
func (l *v2Link) recvCredit(credit uint32) {
	l.received++
	l.credit = credit
	l.heard = true
}

// recv counts a decoded version-two message, takes its credit and, for a
// CONNPROP, its properties. An error is the *V2Error to answer
// (INVAL_CONT, BAD_PROPVAL); the message's properties are then not
// applied. It does not allocate.
func (l *v2Link) recv(h *V2Header) error {
	l.recvCredit(h.Credit)
	switch h.HType {
	case HTypeConnPropMiddle, HTypeConnPropFinal:
	default:
		if l.peerMiddle {
			l.peerMiddle = false
			return l.contError(h, false)
		}
		return nil
	}
	if l.peerFinal {
		return l.contError(h, true)
	}
	if err := checkPropSet(h); err != nil {
		return err
	}
	if !l.peerMiddle {
		l.pending = DefaultTransportProps()
	}
	l.pending.Apply(h.Props)
	l.pending.HostAuth = nil
	if h.HType == HTypeConnPropMiddle {
		l.peerMiddle = true
		return nil
	}
	l.peerMiddle, l.peerFinal = false, true
	l.peer = l.pending
	l.peer.ReverseDir = min(l.peer.ReverseDir, RvrsDirGenl)
	return nil
}

// ReasonPropSequence: a CONNPROP after the peer's CONNPROP_FINAL, or a
// CONNPROP_MIDDLE followed by another header type (RDMA2_ERR_INVAL_CONT).
// Its value stays clear of the codec's 32+iota run.
const ReasonPropSequence Reason = 48

func init() { v2ReasonText[ReasonPropSequence] = "transport property sequence broken" }

// contError is the INVAL_CONT answer owed for h; Value is the header type
// that broke the sequence, Index 1 when the peer's FINAL had come.
func (l *v2Link) contError(h *V2Header, afterFinal bool) error {
	idx := 0
	if afterFinal {
		idx = 1
	}
	return &V2Error{XID: h.XID, Vers: h.Vers, HType: h.HType, Code: V2ErrInvalCont,
		Reason: ReasonPropSequence, Where: InProps, Index: idx, Value: uint64(h.HType)}
}

// checkPropSet applies the engine's checks beyond the codec's to a
// decoded property set: sizes below v2MinInline are BAD_PROPVAL.
func checkPropSet(h *V2Header) error {
	for i, v := range h.Props {
		if (v.Which != PropMaxSendSize && v.Which != PropRecvBufSize) || len(v.Data) != 4 {
			continue
		}
		if n := binary.BigEndian.Uint32(v.Data); n < v2MinInline {
			return &V2Error{XID: h.XID, Vers: h.Vers, HType: h.HType, Code: V2ErrBadPropVal,
				Reason: ReasonBadPropVal, Where: InProps, Index: i, Value: uint64(n), Limit: v2MinInline}
		}
	}
	return nil
}

// limits are the connection's limits from both property sets (the peer's
// defaults until its CONNPROP_FINAL has come).
func (l *v2Link) limits() v2Limits {
	return v2Limits{
		SendMax:         int(min(l.local.MaxSendSize, l.peer.RecvBufSize)),
		RecvMax:         int(min(l.peer.MaxSendSize, l.local.RecvBufSize)),
		MaxSegmentSize:  int(min(l.local.MaxSegmentSize, l.peer.MaxSegmentSize)),
		MaxSegmentCount: int(l.peer.MaxSegmentCount),
		ReverseDir:      l.peer.ReverseDir,
	}
}
