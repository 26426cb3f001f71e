package reverse

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/splitter"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/xdr"
)

// revSlot is one call of a TCP client on its way through the gateway,
// and everything it needs, kept from call to call so that the steady
// state allocates nothing.
//
// A call record is read straight from the socket by a splitter.Splitter
// (Inline = Scratch) into two kinds of memory:
//
//	scratch  the RPC header and every argument byte that is not the body
//	         of a DDP-eligible item, contiguous (Go memory: the requester
//	         copies it once, into its Send buffer or a Long Call's staging
//	         buffer)
//	items    each WRITE/SYMLINK body in a registered pool buffer of its
//	         own, received from the socket into it and exposed to the
//	         server as a Read chunk in place
type revSlot struct {
	c    *revClient
	work chan struct{}

	sp      *splitter.Splitter
	scratch []byte // sp.Scratch() of the current call

	hdrLen           int
	xid              uint32 // the client's XID
	prog, vers, proc uint32
	ddp              bool // no RPCSEC_GSS integrity/privacy
	verifier         int  // reply verifier room beyond an empty one
	received         time.Time
	stats            *gateway.ProcCounters

	walk  ulb.Walker // the reply's, for splicing it back (replyVec)
	msg   rdmarpc.Message
	plan  rdmarpc.ReplyPlan // what the requester offers: offer's rooms
	offer ulb.ReplyOffer    // the policy's plan (planReply)
	rooms [ulb.MaxItems]int
	res   rdmarpc.Result
	vec   [][]byte
	small [oncrpc.MaxReplyHeader]byte // gateway-made replies
}

func newRevSlot(c *revClient) *revSlot {
	return &revSlot{c: c, work: make(chan struct{}, 1), vec: make([][]byte, 0, 4*ulb.MaxItems+4),
		sp: splitter.New(splitter.Config{Pool: c.r.rdma.Pool, Window: revPeekMax, Inline: splitter.Scratch,
			MaxBodies: c.r.cfg.Reverse.MaxReadChunks})}
}

// free returns the buffers the slot still holds (at session end).
func (s *revSlot) free() {
	s.releaseItems()
	s.res.Release()
}

// releaseItems returns the call's item buffers (the message owns them).
func (s *revSlot) releaseItems() {
	s.msg.ReleaseBuffers()
	s.msg.Reset()
	s.sp.Forget()
}

// read reads the next call record into the slot. It returns ok when the
// call is to go to the server; false when the gateway answered or
// dropped it itself. An error ends the session (io.EOF: a clean end).
func (s *revSlot) read(c *revClient) (ok bool, err error) {
	rr := c.rr
	if err := rr.Next(); err != nil {
		if errors.Is(err, tcprpc.ErrRecordTooLarge) {
			return false, s.refuseTooLarge(rr, 0, false, err)
		}
		return false, err
	}
	s.received = time.Now()
	head, perr := rr.Peek(min(oncrpc.MaxCallHeader, revPeekMax))
	if perr != nil && perr != io.EOF {
		return false, perr
	}
	if xid, mt, err := oncrpc.PeekMsgType(head); err == nil && mt == oncrpc.Reply {
		// The client's answer to a callback (backchannel.go).
		return false, c.callbackReply(rr, xid)
	}
	var h oncrpc.CallHeader
	hdrLen, herr := h.Decode(head)
	if herr != nil {
		return false, s.rejectHeader(head, &h, herr)
	}
	s.xid, s.prog, s.vers, s.proc, s.hdrLen = h.XID, h.Prog, h.Vers, h.Proc, hdrLen
	wrapped, gerr := oncrpc.GSSBodyWrapped(h.Cred)
	s.ddp = !wrapped && gerr == nil
	s.verifier = 0
	if h.Cred.Flavor != oncrpc.AuthNone && h.Cred.Flavor != oncrpc.AuthSys {
		s.verifier = ulb.MaxVerifierBody
	}
	s.stats = c.met.Proc(h.Prog, h.Vers, h.Proc)
	s.stats.Calls.Inc()
	if h.Prog == ulb.ProgNFS {
		c.link.vers.Store(h.Vers)
	}
	if c.link.rdmaVers.Load() == rdmarpc.V2Version && !ulb.BoundOnV2(h.Prog) {
		return false, s.refuseUnbound()
	}
	if err := s.fill(rr); err != nil {
		if errors.Is(err, tcprpc.ErrRecordTooLarge) {
			// A later fragment crossed the limit: the header was read.
			return false, s.refuseTooLarge(rr, s.xid, true, err)
		}
		return false, err
	}
	s.planReply()
	return true, nil
}

// fill reads the record into the slot's message: the arguments are
// walked in the read-ahead window, each item's body lands in a pool
// buffer, the rest in scratch. Items stop at reverse.max_read_chunks
// with a body (RFC 8267 §6.4.2: the rest go in the Long Call); arguments
// that do not walk, more items than the slot holds or one larger than a
// pool buffer go inline too and are counted as DDP fallbacks (the server
// judges unwalkable arguments: GARBAGE_ARGS).
func (s *revSlot) fill(rr *tcprpc.RecordReader) error {
	out, err := s.sp.Split(s.c.ctx, rr, &s.msg, splitter.Record{XID: s.xid, Dir: ulb.Call,
		Prog: s.prog, Vers: s.vers, Proc: s.proc, HdrLen: s.hdrLen, Walk: s.ddp})
	s.scratch = s.sp.Scratch()
	if err != nil {
		return fmt.Errorf("call xid %#x: %w", s.xid, err)
	}
	switch out.Stop {
	case splitter.Unwalkable:
		s.c.met.DDPFallbacks.Inc()
		s.c.log.Debug("call arguments sent inline: not walkable", "peer", s.c.peer, "xid", s.xid, "error", out.Err)
	case splitter.TooMany, splitter.TooLarge:
		s.c.met.DDPFallbacks.Inc()
	}
	return nil
}

// planReply offers reply room by the requester policy (ulb.Requester:
// a Write chunk per READ/READLINK result sized from the call, a Reply
// chunk when the rest may not fit our inline receive size or cannot be
// bounded; its server quirks). The estimator reads whole arguments; the
// item bodies are elsewhere, so their length words are zeroed while it
// runs (no READ/READLINK result size depends on a WRITE or SYMLINK body)
// and restored after.
func (s *revSlot) planReply() {
	var saved [ulb.MaxItems]uint32
	items := s.sp.Items()
	for i, it := range items {
		w := s.scratch[it.At-4:]
		saved[i] = binary.BigEndian.Uint32(w)
		binary.BigEndian.PutUint32(w, 0)
	}
	call := ulb.CallInfo{Prog: s.prog, Vers: s.vers, Proc: s.proc, Args: s.scratch[s.hdrLen:],
		Verifier: s.verifier, Wrapped: !s.ddp}
	pol := s.c.r.replyPolicy(s.c.link.rdmaVers.Load())
	s.offer = pol.Plan(&call, s.rooms[:0])
	for i, it := range items {
		binary.BigEndian.PutUint32(s.scratch[it.At-4:], saved[i])
	}
	s.plan = rdmarpc.ReplyPlan{WriteChunks: s.offer.WriteChunks, ReplyChunk: s.offer.ReplyChunk}
}

// replyPolicy is the requester policy for the calls to the server, from
// the configuration and the pool, on a connection of RPC-over-RDMA
// version vers: version two continues replies longer than our receive
// buffer, so the policy offers a Reply chunk only for long ones
// (ulb.Requester.Continuation). A call planned for one version and sent
// on a connection of the other (the server changed version across a
// reconnection) is answered as its reply allows: a version-one server
// refuses a reply without room with ERR_CHUNK.
func (r *Gateway) replyPolicy(vers uint32) ulb.Requester {
	return ulb.Requester{InlineRecv: int(r.cfg.RDMA.InlineRecv), MaxChunk: r.rdma.Pool.MaxSize(),
		MaxWriteChunks: r.cfg.Reverse.MaxWriteChunks, HeaderMax: replyHeaderMax,
		Continuation: vers == rdmarpc.V2Version}
}

// replyHeaderMax is ulb.Requester.HeaderMax for rdmarpc's requester.
func replyHeaderMax(writeChunks []int) int {
	p := rdmarpc.ReplyPlan{WriteChunks: writeChunks}
	return p.ReplyHeaderMax()
}

// rejectHeader answers a record that is not a usable RPC call: an RPC
// version other than 2 gets RPC_MISMATCH (RFC 5531 §9), a credential or
// verifier over 400 bytes AUTH_BADCRED; anything else (garbage; replies
// go to callbackReply) is dropped and counted. The rest of the record is skipped by the next read.
func (s *revSlot) rejectHeader(head []byte, h *oncrpc.CallHeader, err error) error {
	c := s.c
	var rh oncrpc.ReplyHeader
	switch {
	case len(head) < 8:
		c.met.CallDropped("not_rpc")
		c.met.CallEvent("not_rpc", c.peer, 0)
		return nil
	case errors.Is(err, oncrpc.ErrBadRPCVersion):
		rh = oncrpc.RPCMismatchReply(h.XID)
		c.met.SystemErrs.WithLabelValues("rpc_mismatch").Inc()
	case errors.Is(err, oncrpc.ErrAuthTooLong):
		rh = oncrpc.AuthErrorReply(h.XID, oncrpc.AuthBadCred)
		c.met.CallDropped("bad_auth")
	default:
		c.met.CallDropped("not_rpc")
		c.met.CallEvent("not_rpc", c.peer, h.XID)
		return nil
	}
	reason := "bad_auth"
	if errors.Is(err, oncrpc.ErrBadRPCVersion) {
		reason = "rpc_mismatch"
	}
	c.met.CallEvent(reason, c.peer, h.XID)
	return s.replyHeaderOnly(&rh)
}

// refuseTooLarge answers a call record over reverse.max_call_bytes with
// GARBAGE_ARGS: the gateway cannot take in its arguments (the server
// would never see them), and RPC has no "too large" answer of its own;
// the record reader skips the rest of the record at the next read and
// the connection goes on. Clients are told the largest WRITE the gateway
// carries (Config.CarryLimits), so only one that ignores it gets here.
// xid is the call's when its header was already read (known); else the
// header is peeked, and a record without one is dropped (skipped too).
func (s *revSlot) refuseTooLarge(rr *tcprpc.RecordReader, xid uint32, known bool, cause error) error {
	c := s.c
	if !known {
		head, _ := rr.Peek(min(oncrpc.MaxCallHeader, revPeekMax))
		var h oncrpc.CallHeader
		if _, err := h.Decode(head); err != nil {
			c.met.CallDropped("not_rpc")
			c.log.Info("oversize record is not an RPC call; skipped", "peer", c.peer, "error", cause)
			return nil
		}
		xid = h.XID
	}
	c.met.SystemErrs.WithLabelValues("call_too_large").Inc()
	c.log.Info("call larger than reverse.max_call_bytes answered GARBAGE_ARGS; record skipped", "peer", c.peer, "xid", xid, "error", cause)
	rh := oncrpc.GarbageArgsReply(xid)
	return s.replyHeaderOnly(&rh)
}

// refuseUnbound answers PROG_UNAVAIL to a MOUNT, NLM or NSM call when
// the connection to the server speaks RPC-over-RDMA version two, whose
// NFS binding gives them none (ulb.BoundOnV2): they are not sent. The
// record reader skips the rest of the record at the next read.
func (s *revSlot) refuseUnbound() error {
	s.c.met.SystemErrs.WithLabelValues("no_v2_binding").Inc()
	rh := oncrpc.ProgUnavailReply(s.xid)
	return s.replyHeaderOnly(&rh)
}

// replyHeaderOnly sends a gateway-made reply of just a header.
func (s *revSlot) replyHeaderOnly(rh *oncrpc.ReplyHeader) error {
	e := xdr.NewEncoder(s.small[:])
	if err := rh.Encode(&e); err != nil {
		return err
	}
	s.vec = append(s.vec[:0], e.Bytes())
	err := s.c.writeReply(s.vec)
	clear(s.vec)
	s.vec = s.vec[:0]
	return err
}
