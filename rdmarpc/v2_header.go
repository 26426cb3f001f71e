package rdmarpc

import (
	"fmt"
	"slices"

	"github.com/rdmagw/rdmagw/xdr"
)

// V2Version is rdma_vers of RPC-over-RDMA version two
// (draft-ietf-nfsv4-rpcrdma-version-two-07).
const V2Version = 2

// Where draft -07 contradicts itself the codec follows its XDR; each such
// choice is one constant here (doc.go, "Version two", says why).
const (
	// V2PrefixSize is struct rpcrdma2_hdr_prefix: the four words of
	// rpcrdma_common, 16 octets (the Error Handling prose says 20). A
	// message shorter than this is discarded without an answer.
	V2PrefixSize = 16

	// V2CreditLimit bounds rdma_credit, one 32-bit count (the XDR and
	// the Flow Control section; the appendix's "two 16-bit subfields" is
	// not followed): credit values MUST be less than 2^31 - 1.
	V2CreditLimit = 1<<31 - 1

	// V2InitialReceivedCredits is a peer's "Received credits" before the
	// first message arrives: one message may be outstanding.
	V2InitialReceivedCredits = 1

	// V2DefaultInline is the inline threshold both ways when no transport
	// properties were exchanged.
	V2DefaultInline = 4096

	// V2FirstMessageMax bounds a version-two requester's first message:
	// the responder may be version one, whose default inline threshold is
	// 1024 octets.
	V2FirstMessageMax = 1024
)

// V2Credit is the rdma_credit a sender writes: its Sent message count plus
// its Advertised credits, modulo 2^32.
func V2Credit(sent, advertised uint32) uint32 { return sent + advertised }

// V2MayPost reports whether a peer that has posted sent messages may post
// one more, given received, the rdma_credit of the last message it
// received (V2InitialReceivedCredits before any). The draft's "MUST NOT
// post if Sent message count is greater than Received credits" lets the
// count reach received+1; the codec counts the message about to be
// posted: sent+1 <= received, modulo 2^32 (sent < received as a signed
// 32-bit difference).
func V2MayPost(sent, received uint32) bool { return int32(received-sent) > 0 }

// HType is rdma_htype, the fourth fixed word of a version-two header.
type HType uint32

// Header types (the XDR's RDMA2_* header type codes).
const (
	HTypeError          HType = 4  // RDMA2_ERROR: rpcrdma2_hdr_error
	HTypeGrant          HType = 5  // RDMA2_GRANT: no body
	HTypeConnPropMiddle HType = 6  // RDMA2_CONNPROP_MIDDLE: a property set, more follow
	HTypeConnPropFinal  HType = 7  // RDMA2_CONNPROP_FINAL: the last property set
	HTypeCallExternal   HType = 8  // RDMA2_CALL_EXTERNAL: the Call is in the Call chunk
	HTypeCallMiddle     HType = 9  // RDMA2_CALL_MIDDLE: a Call fragment, more follow
	HTypeCallInline     HType = 10 // RDMA2_CALL_INLINE: the Call (or its last fragment) inline
	HTypeReplyExternal  HType = 11 // RDMA2_REPLY_EXTERNAL: the Reply is in the Reply chunk
	HTypeReplyMiddle    HType = 12 // RDMA2_REPLY_MIDDLE: a Reply fragment, more follow
	HTypeReplyInline    HType = 13 // RDMA2_REPLY_INLINE: the Reply (or its last fragment) inline
)

var htypeText = [...]string{
	HTypeError:          "RDMA2_ERROR",
	HTypeGrant:          "RDMA2_GRANT",
	HTypeConnPropMiddle: "RDMA2_CONNPROP_MIDDLE",
	HTypeConnPropFinal:  "RDMA2_CONNPROP_FINAL",
	HTypeCallExternal:   "RDMA2_CALL_EXTERNAL",
	HTypeCallMiddle:     "RDMA2_CALL_MIDDLE",
	HTypeCallInline:     "RDMA2_CALL_INLINE",
	HTypeReplyExternal:  "RDMA2_REPLY_EXTERNAL",
	HTypeReplyMiddle:    "RDMA2_REPLY_MIDDLE",
	HTypeReplyInline:    "RDMA2_REPLY_INLINE",
}

func (t HType) String() string {
	if t.Known() {
		return htypeText[t]
	}
	return fmt.Sprintf("rdma_htype(%d)", uint32(t))
}

// Known reports whether t is a header type of the base protocol.
func (t HType) Known() bool { return t >= HTypeError && t <= HTypeReplyInline }

// IsCall reports whether t conveys (part of) an RPC Call.
func (t HType) IsCall() bool { return t >= HTypeCallExternal && t <= HTypeCallInline }

// IsReply reports whether t conveys (part of) an RPC Reply.
func (t HType) IsReply() bool { return t >= HTypeReplyExternal && t <= HTypeReplyInline }

// IsControl reports whether t is a control-plane header type (ERROR,
// GRANT, CONNPROP_*): never sent With Invalidate, never carries an RPC
// message.
func (t HType) IsControl() bool { return t >= HTypeError && t <= HTypeConnPropFinal }

// IsMiddle reports whether t is a continuation fragment that another
// fragment of the same kind must follow (CONNPROP_MIDDLE, CALL_MIDDLE,
// REPLY_MIDDLE).
func (t HType) IsMiddle() bool {
	return t == HTypeConnPropMiddle || t == HTypeCallMiddle || t == HTypeReplyMiddle
}

// HasPayload reports whether part of an RPC message follows the header in
// the same Send (the "Msg" column of the draft's header type table).
func (t HType) HasPayload() bool {
	switch t {
	case HTypeCallMiddle, HTypeCallInline, HTypeReplyMiddle, HTypeReplyInline:
		return true
	}
	return false
}

// V2 header sizes on the wire (without chunks or properties).
const (
	// V2ErrorMaxSize is the largest RDMA2_ERROR: prefix, rdma_err and two
	// words (ERR_VERS, ERR_WRITE_RESOURCE).
	V2ErrorMaxSize = V2PrefixSize + 12
	// V2MiddleHeaderSize is a CALL_MIDDLE or REPLY_MIDDLE header.
	V2MiddleHeaderSize = V2PrefixSize + 4
	// V2CallInlineMinSize is a CALL_INLINE with three empty lists.
	V2CallInlineMinSize = V2PrefixSize + 16
	// V2ReplyInlineMinSize is a REPLY_INLINE with an empty Write list.
	V2ReplyInlineMinSize = V2PrefixSize + 4
)

// Capacity inside a V2Header beyond the version-one storage it reuses.
const (
	inlineCallSegments = 8  // Call chunk segments
	inlineProps        = 16 // transport properties
	inlinePropBytes    = 64 // property values built or copied into the header
)

// V2Header is one decoded (or to-be-encoded) version-two transport header.
// Which fields mean something depends on HType:
//
//	ERROR              ErrBody
//	GRANT              (nothing: the prefix carries the credit)
//	CONNPROP_*         Props
//	CALL_EXTERNAL      InvHandle, Call, Reads, Writes, Reply/HasReply
//	CALL_INLINE        InvHandle, Reads, Writes, Reply/HasReply
//	CALL/REPLY_MIDDLE  Remaining
//	REPLY_EXTERNAL     Writes, Reply/HasReply (HasReply is required)
//	REPLY_INLINE       Writes
//
// In a call Writes and Reply are the provisional Write chunks and Reply
// chunk (rdma_provisional_writes, rdma_provisional_reply).
//
// As with Header, the slices point into storage inside the V2Header: do
// not copy it by value once it holds chunks (use CopyFrom); Decode and
// Reset invalidate slices taken earlier. Property data decoded from a
// message points into that message's buffer.
type V2Header struct {
	XID    uint32 // rdma_xid (ignored in GRANT, where it is zero)
	Vers   uint32 // rdma_vers
	Credit uint32 // rdma_credit: the sender's Sent count + Advertised credits
	HType  HType  // rdma_htype

	InvHandle uint32       // rdma_inv_handle: handle for Send With Invalidate, 0 = none
	Call      ReadList     // CALL_EXTERNAL: the Call chunk (every Position is 0)
	Reads     ReadList     // data item Read chunks (no Position 0)
	Writes    []WriteChunk // Write list
	Reply     WriteChunk   // Reply chunk, meaningful when HasReply
	HasReply  bool
	Remaining uint32      // *_MIDDLE: rdma_remaining
	ErrBody   V2ErrorBody // ERROR: rdma_err and its arm
	Props     []PropVal   // CONNPROP_*: rdma_props in wire order, unknown ones included

	lists     Header // storage for Reads, Writes, Reply and the v1 list codecs
	callStore [inlineCallSegments]ReadSegment
	propStore [inlineProps]PropVal
	propBytes [inlinePropBytes]byte
	npb       int // propBytes in use
}

// Reset empties h for reuse without releasing its storage.
func (h *V2Header) Reset() {
	h.XID, h.Vers, h.Credit, h.HType = 0, 0, 0, 0
	h.InvHandle, h.Remaining = 0, 0
	h.ErrBody = V2ErrorBody{}
	h.lists.Reset()
	h.Call = h.callStore[:0]
	h.Reads = h.lists.readStore[:0]
	h.Writes = h.lists.writeStore[:0]
	h.Reply, h.HasReply = nil, false
	h.Props = h.propStore[:0]
	h.npb = 0
}

// Init resets h and sets the prefix of a version-two message, ready for
// the builders.
func (h *V2Header) Init(xid, credit uint32, t HType) {
	h.Reset()
	h.XID, h.Vers, h.Credit, h.HType = xid, V2Version, credit, t
}

// AppendCallSegment adds a segment to the Call chunk (Position 0) of a
// CALL_EXTERNAL.
func (h *V2Header) AppendCallSegment(s Segment) {
	h.Call = append(h.Call, ReadSegment{Segment: s})
}

// AppendReadSegment adds one data item Read segment at Position pos
// (never 0 in version two; chunks in ascending Position order).
func (h *V2Header) AppendReadSegment(pos uint32, s Segment) {
	h.Reads = append(h.Reads, ReadSegment{Position: pos, Segment: s})
}

// AppendReadChunk adds a data item Read chunk at Position pos.
func (h *V2Header) AppendReadChunk(pos uint32, segs ...Segment) {
	for _, s := range segs {
		h.AppendReadSegment(pos, s)
	}
}

// AppendWriteChunk adds a Write chunk made of a copy of segs.
func (h *V2Header) AppendWriteChunk(segs ...Segment) {
	w := WriteChunk(h.lists.allocSegs(len(segs)))
	copy(w, segs)
	h.Writes = append(h.Writes, w)
}

// SetReplyChunk sets the Reply chunk to a copy of segs.
func (h *V2Header) SetReplyChunk(segs ...Segment) {
	w := WriteChunk(h.lists.allocSegs(len(segs)))
	copy(w, segs)
	h.Reply, h.HasReply = w, true
}

// ClearReplyChunk removes the Reply chunk.
func (h *V2Header) ClearReplyChunk() { h.Reply, h.HasReply = nil, false }

// SetError makes h an RDMA2_ERROR carrying body; the prefix is kept.
func (h *V2Header) SetError(body V2ErrorBody) { h.HType, h.ErrBody = HTypeError, body }

// InvHandleListed reports whether InvHandle is 0 or one of the handles of
// the header's chunks, as the draft requires of a Requester; a Responder
// must not invalidate a handle it was not given.
func (h *V2Header) InvHandleListed() bool {
	if h.InvHandle == 0 {
		return true
	}
	for _, l := range [...]ReadList{h.Call, h.Reads} {
		for i := range l {
			if l[i].Handle == h.InvHandle {
				return true
			}
		}
	}
	for _, w := range h.Writes {
		for i := range w {
			if w[i].Handle == h.InvHandle {
				return true
			}
		}
	}
	for i := range h.Reply {
		if h.Reply[i].Handle == h.InvHandle {
			return true
		}
	}
	return false
}

// Decode parses the version-two transport header at the start of b under
// limits lim (the zero Limits means the defaults; they apply to each of
// the Call chunk, the Read list and the Write list on its own) and
// returns its length: for the header types that carry an RPC message
// (HasPayload) it starts at b[n:] and is at least 4 bytes long, since the
// XDR places its first word (rdma_rpc_first_word) in the header
// structure.
//
// Errors: a *ShortError when b is shorter than V2PrefixSize (discard
// silently), otherwise a *V2Error naming the RDMA2_ERROR answer owed,
// what was wrong and where (see V2Error). On error h holds what was
// decoded so far; the prefix when b is long enough.
//
// An RDMA2_ERROR whose rdma_err is unknown decodes (the XDR's default arm
// is void); ErrBody.Code.Known() tells the receiver to discard it. The
// XID of RDMA2_GRANT is not checked (receivers ignore it).
//
// Decode does not allocate unless the header holds more than 8 Call
// chunk segments, 16 Read segments, 8 Write chunks, 16 Write and Reply
// segments or 16 properties, or it fails.
func (h *V2Header) Decode(b []byte, lim Limits) (int, error) {
	h.Reset()
	if len(b) < V2PrefixSize {
		return 0, &ShortError{Len: len(b), Need: V2PrefixSize}
	}
	d := xdr.NewDecoder(b)
	h.XID, _ = d.Uint32()
	h.Vers, _ = d.Uint32()
	h.Credit, _ = d.Uint32()
	t, _ := d.Uint32()
	h.HType = HType(t)
	if h.Vers != V2Version {
		return 0, h.fail(V2ErrVers, ReasonBadVersion, InFixed, 4, -1, uint64(h.Vers), 0, nil)
	}
	lim = lim.withDefaults()
	h.lists.XID, h.lists.Proc = h.XID, Proc(h.HType)
	var err error
	switch h.HType {
	case HTypeError:
		err = h.decodeErrorBody(&d)
	case HTypeGrant:
	case HTypeConnPropMiddle, HTypeConnPropFinal:
		err = h.decodeProps(&d)
	case HTypeCallExternal, HTypeCallInline:
		err = h.decodeCall(&d, &lim)
	case HTypeCallMiddle, HTypeReplyMiddle:
		if h.Remaining, err = d.Uint32(); err != nil {
			err = h.truncated(InV2Body, err)
		} else {
			err = h.checkFirstWord(&d)
		}
	case HTypeReplyExternal, HTypeReplyInline:
		err = h.decodeReply(&d, &lim)
	default:
		err = h.fail(V2ErrInvalHType, ReasonBadHType, InFixed, 12, -1, uint64(h.HType), 0, nil)
	}
	if err != nil {
		return 0, err
	}
	return d.Offset(), nil
}

// decodeCall reads rpcrdma2_hdr_call_external or _call_inline.
func (h *V2Header) decodeCall(d *xdr.Decoder, lim *Limits) error {
	var err error
	if h.InvHandle, err = d.Uint32(); err != nil {
		return h.truncated(InV2Body, err)
	}
	if h.HType == HTypeCallExternal {
		off := d.Offset()
		h.lists.Reads = h.callStore[:0]
		if err := h.lists.decodeReadList(d, lim); err != nil {
			return h.wrap(err, InCallChunk)
		}
		h.Call = h.lists.Reads
		if len(h.Call) == 0 {
			return h.fail(V2ErrBadXDR, ReasonNoCallChunk, InCallChunk, off, -1, 0, 0, nil)
		}
		for i := range h.Call {
			if p := h.Call[i].Position; p != 0 {
				return h.fail(V2ErrBadXDR, ReasonCallPosition, InCallChunk, readEntryOffset(off, i), i, uint64(p), 0, nil)
			}
		}
	}
	off := d.Offset()
	h.lists.Reads = h.lists.readStore[:0]
	if err := h.lists.decodeReadList(d, lim); err != nil {
		return h.wrap(err, 0)
	}
	h.Reads = h.lists.Reads
	if len(h.Reads) > 0 && h.Reads[0].Position == 0 {
		// Decode has checked that Positions never decrease, so only
		// the first chunk can be at Position zero.
		return h.fail(V2ErrBadXDR, ReasonDataPositionZero, InReadList, readEntryOffset(off, 0), 0, 0, 0, nil)
	}
	if err := h.decodeWritesReply(d, lim, true); err != nil {
		return err
	}
	if h.HType == HTypeCallInline {
		return h.checkFirstWord(d)
	}
	return nil
}

// decodeReply reads rpcrdma2_hdr_reply_external or _reply_inline.
func (h *V2Header) decodeReply(d *xdr.Decoder, lim *Limits) error {
	external := h.HType == HTypeReplyExternal
	if err := h.decodeWritesReply(d, lim, external); err != nil {
		return err
	}
	if !external {
		return h.checkFirstWord(d)
	}
	if !h.HasReply {
		return h.fail(V2ErrBadXDR, ReasonNoReplyChunk, InReplyChunk, d.Offset()-4, -1, 0, 0, nil)
	}
	return nil
}

// decodeWritesReply reads the Write list and, when withReply, the
// optional Reply chunk.
func (h *V2Header) decodeWritesReply(d *xdr.Decoder, lim *Limits, withReply bool) error {
	if err := h.lists.decodeWriteList(d, lim); err != nil {
		return h.wrap(err, 0)
	}
	h.Writes = h.lists.Writes
	if !withReply {
		return nil
	}
	if err := h.lists.decodeReplyChunk(d, lim); err != nil {
		return h.wrap(err, 0)
	}
	h.Reply, h.HasReply = h.lists.Reply, h.lists.HasReply
	return nil
}

// readEntryOffset is the offset of the Position word of entry i of a Read
// list (or Call chunk) starting at off: each entry is a discriminator and
// a Read segment.
func readEntryOffset(off, i int) int { return off + i*(4+readSegmentSize) + 4 }

// checkFirstWord checks that the RPC message's first word, part of the
// header structure in the XDR, is there. It is not consumed: the message
// starts at the returned header length.
func (h *V2Header) checkFirstWord(d *xdr.Decoder) error {
	if d.Len() < 4 {
		return h.fail(V2ErrBadXDR, ReasonTruncated, InRPCMessage, d.Offset(), -1, 0, 0, d.Skip(4))
	}
	return nil
}

// Encode writes h into b and returns the number of bytes written: the
// header only; for the header types that carry an RPC message, the caller
// puts the message right after it. Like Header.Encode it does not check
// what Decode enforces, so tests can build malformed headers.
func (h *V2Header) Encode(b []byte) (int, error) {
	e := xdr.NewEncoder(b)
	e.PutUint32(h.XID)
	e.PutUint32(h.Vers)
	e.PutUint32(h.Credit)
	e.PutUint32(uint32(h.HType))
	switch h.HType {
	case HTypeError:
		h.ErrBody.encode(&e)
	case HTypeGrant:
	case HTypeConnPropMiddle, HTypeConnPropFinal:
		encodeProps(&e, h.Props)
	case HTypeCallExternal:
		e.PutUint32(h.InvHandle)
		encodeReadList(&e, h.Call)
		encodeReadList(&e, h.Reads)
		encodeWriteList(&e, h.Writes)
		encodeReplyChunk(&e, h.HasReply, h.Reply)
	case HTypeCallInline:
		e.PutUint32(h.InvHandle)
		encodeReadList(&e, h.Reads)
		encodeWriteList(&e, h.Writes)
		encodeReplyChunk(&e, h.HasReply, h.Reply)
	case HTypeCallMiddle, HTypeReplyMiddle:
		e.PutUint32(h.Remaining)
	case HTypeReplyExternal:
		encodeWriteList(&e, h.Writes)
		encodeReplyChunk(&e, h.HasReply, h.Reply)
	case HTypeReplyInline:
		encodeWriteList(&e, h.Writes)
	default:
		return 0, fmt.Errorf("rpcrdma: encode xid 0x%08x: unknown version-two header type %d", h.XID, uint32(h.HType))
	}
	if err := e.Err(); err != nil {
		return 0, err
	}
	return e.Len(), nil
}

// EncodedLen is the number of bytes Encode writes for h.
func (h *V2Header) EncodedLen() int {
	n := V2PrefixSize
	reply := 4
	if h.HasReply {
		reply += h.Reply.encodedLen()
	}
	switch h.HType {
	case HTypeError:
		n += h.ErrBody.encodedLen()
	case HTypeConnPropMiddle, HTypeConnPropFinal:
		n += propsLen(h.Props)
	case HTypeCallExternal:
		n += 4 + h.Call.encodedLen() + h.Reads.encodedLen() + writeListLen(h.Writes) + reply
	case HTypeCallInline:
		n += 4 + h.Reads.encodedLen() + writeListLen(h.Writes) + reply
	case HTypeCallMiddle, HTypeReplyMiddle:
		n += 4
	case HTypeReplyExternal:
		n += writeListLen(h.Writes) + reply
	case HTypeReplyInline:
		n += writeListLen(h.Writes)
	}
	return n
}

// CopyFrom makes h a deep copy of src in h's own storage (property data
// included).
func (h *V2Header) CopyFrom(src *V2Header) {
	if h == src {
		return
	}
	h.Reset()
	h.XID, h.Vers, h.Credit, h.HType = src.XID, src.Vers, src.Credit, src.HType
	h.InvHandle, h.Remaining, h.ErrBody = src.InvHandle, src.Remaining, src.ErrBody
	h.Call = append(h.Call, src.Call...)
	h.Reads = append(h.Reads, src.Reads...)
	for _, w := range src.Writes {
		h.AppendWriteChunk(w...)
	}
	if src.HasReply {
		h.SetReplyChunk(src.Reply...)
	}
	for _, p := range src.Props {
		data := h.propData(len(p.Data))
		copy(data, p.Data)
		h.Props = append(h.Props, PropVal{Which: p.Which, Data: data})
	}
}

// Equal reports whether h and o describe the same message: the same
// prefix and the same body for their header type.
func (h *V2Header) Equal(o *V2Header) bool {
	if h.XID != o.XID || h.Vers != o.Vers || h.Credit != o.Credit || h.HType != o.HType {
		return false
	}
	switch h.HType {
	case HTypeError:
		return h.ErrBody.canonical() == o.ErrBody.canonical()
	case HTypeConnPropMiddle, HTypeConnPropFinal:
		return propsEqual(h.Props, o.Props)
	case HTypeCallMiddle, HTypeReplyMiddle:
		return h.Remaining == o.Remaining
	case HTypeCallExternal, HTypeCallInline, HTypeReplyExternal, HTypeReplyInline:
		if h.InvHandle != o.InvHandle || !slices.Equal(h.Call, o.Call) || !slices.Equal(h.Reads, o.Reads) ||
			len(h.Writes) != len(o.Writes) || h.HasReply != o.HasReply {
			return false
		}
		for i := range h.Writes {
			if !h.Writes[i].equal(o.Writes[i]) {
				return false
			}
		}
		return !h.HasReply || h.Reply.equal(o.Reply)
	}
	return true
}

// String summarises h for logs, e.g.
// "xid 0x1234abcd v2 credit 160 RDMA2_CALL_INLINE inv 0x0 reads 1/2 writes 1 reply 1".
func (h *V2Header) String() string {
	s := fmt.Sprintf("xid 0x%08x v%d credit %d %v", h.XID, h.Vers, h.Credit, h.HType)
	switch h.HType {
	case HTypeError:
		s += " " + h.ErrBody.String()
	case HTypeConnPropMiddle, HTypeConnPropFinal:
		s += fmt.Sprintf(" props %d", len(h.Props))
	case HTypeCallMiddle, HTypeReplyMiddle:
		s += fmt.Sprintf(" remaining %d", h.Remaining)
	case HTypeCallExternal, HTypeCallInline, HTypeReplyExternal, HTypeReplyInline:
		if h.HType.IsCall() {
			s += fmt.Sprintf(" inv 0x%x", h.InvHandle)
		}
		if h.HType == HTypeCallExternal {
			s += fmt.Sprintf(" call %d", len(h.Call))
		}
		if h.HType.IsCall() {
			s += fmt.Sprintf(" reads %d/%d", h.Reads.ChunkCount(), len(h.Reads))
		}
		s += fmt.Sprintf(" writes %d", len(h.Writes))
		if h.HasReply {
			s += fmt.Sprintf(" reply %d", len(h.Reply))
		}
	}
	return s
}
