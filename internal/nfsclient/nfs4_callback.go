package nfsclient

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// The NFSv4.1 callback service (RFC 8881 §20): with V4.Callbacks set,
// Setup creates the session with its back channel on the fore channel's
// connection (CREATE_SESSION4_FLAG_CONN_BACK_CHAN), and the transport
// hands the server's calls on that connection — RPC CALL records on TCP,
// backward-direction calls on RPC-over-RDMA (RFC 8167) — to the client,
// which serves CB_NULL and CB_COMPOUND with CB_SEQUENCE and CB_RECALL.
// A recalled delegation is returned with DELEGRETURN on the fore channel
// (the client caches nothing, so there is nothing to flush first).

// CBProgram is the callback program number the client registers.
const CBProgram = 0x40000000

// Callback operation numbers and statuses (RFC 8881 §20).
const (
	opCBGetattr          = 3
	opCBRecall           = 4
	opCBSequence         = 11
	opCBIllegal          = 10044
	op4DelegRet          = 8
	nfs4ErrNotSupp       = 10004
	nfs4ErrBadStateid    = 10025
	nfs4ErrBadSession    = 10052
	nfs4ErrBadSlot       = 10053
	nfs4ErrSeqMisordered = 10063
	nfs4ErrRetryUncached = 10068
	nfs4ErrOpIllegal     = 10044
	nfs4ErrMinorVers     = 10021

	// SEQ4_STATUS bits that say the server cannot reach the back channel.
	Seq4StatusCBPathDown        = 0x00000001
	Seq4StatusCBPathDownSession = 0x00000200
	Seq4StatusBackchannelFault  = 0x00000400

	createSessionConnBackChan = 0x00000002
	shareAccessRead           = 1
	shareAccessWantReadDeleg  = 0x0100
)

// callbackTransport is a Transport that can serve the server's calls on
// its connection.
type callbackTransport interface {
	// SetCallbackHandler installs h, which gets each whole RPC call and
	// returns the whole RPC reply (nil: none).
	SetCallbackHandler(h func(call []byte) []byte)
	// backchannelLimits are the back channel attributes to advertise:
	// the largest request and reply, and how many at once.
	backchannelLimits() (size, slots int)
}

// SetCallbackHandler implements callbackTransport: calls arriving on the
// RPC-over-RDMA connection in the backward direction go to h.
func (t *RDMA) SetCallbackHandler(h func(call []byte) []byte) {
	if h == nil {
		t.conn.SetBackwardHandler(nil)
		return
	}
	t.conn.SetBackwardHandler(rdmarpc.BackwardHandlerFunc(h))
}

func (t *RDMA) backchannelLimits() (int, int) {
	return t.conn.BackwardMax(), t.conn.BackwardCredits()
}

// SetCallbackHandler implements callbackTransport: CALL records on the
// TCP connection go to h and its replies go back on the connection.
func (t *TCP) SetCallbackHandler(h func(call []byte) []byte) {
	if h == nil {
		t.cb.Store(nil)
		return
	}
	t.cb.Store(&h)
}

func (t *TCP) backchannelLimits() (int, int) { return 16 << 10, 16 }

// callbackRecord serves a CALL record read by readLoop; false when rec is
// not a call or no handler is installed.
func (t *TCP) callbackRecord(rec []byte) bool {
	if len(rec) < 8 || binary.BigEndian.Uint32(rec[4:]) != uint32(oncrpc.Call) {
		return false
	}
	hp := t.cb.Load()
	if hp == nil {
		return true // a call with nobody to serve it: dropped
	}
	go func() {
		reply := (*hp)(rec)
		if reply == nil {
			return
		}
		t.wmu.Lock()
		err := t.rw.WriteRecord(reply, nil, nil)
		t.wmu.Unlock()
		if err != nil {
			t.fail(fmt.Errorf("nfsclient: send callback reply: %w", err))
		}
	}()
	return true
}

// Delegation is a delegation the client holds.
type Delegation struct {
	Stateid [stateidLen]byte
	FH      []byte
	Write   bool
}

// Recall reports a CB_RECALL and how returning the delegation went.
type Recall struct {
	Delegation *Delegation
	Err        error // DELEGRETURN's outcome
}

// cbState is the client's callback service state.
type cbState struct {
	mu      sync.Mutex
	slots   []cbSlot
	delegs  map[[12]byte]*Delegation // by stateid "other"
	recalls chan Recall
	calls   atomic.Int64 // callback RPCs served
	nulls   atomic.Int64
}

// cbSlot is one back channel slot: the last sequence ID and its reply.
type cbSlot struct {
	seq   uint32
	reply []byte
}

func (c *V4) cbInit(slots int) {
	c.cb = &cbState{slots: make([]cbSlot, max(slots, 1)), delegs: map[[12]byte]*Delegation{},
		recalls: make(chan Recall, 64)}
}

// Recalls delivers each recall the server made and the result of
// returning the delegation (Callbacks only).
func (c *V4) Recalls() <-chan Recall {
	if c.cb == nil {
		return nil
	}
	return c.cb.recalls
}

// CallbacksServed is the number of callback RPCs (CB_NULL and
// CB_COMPOUND) the client has answered, and of those the CB_NULLs.
func (c *V4) CallbacksServed() (all, null int64) {
	if c.cb == nil {
		return 0, 0
	}
	return c.cb.calls.Load(), c.cb.nulls.Load()
}

// SeqStatusFlags is sr_status_flags of the latest SEQUENCE reply.
func (c *V4) SeqStatusFlags() uint32 { return c.seqFlags.Load() }

// serveCallback answers one callback RPC call.
func (c *V4) serveCallback(call []byte) []byte {
	var h oncrpc.CallHeader
	n, err := h.Decode(call)
	if err != nil {
		return nil // not an RPC call we can answer
	}
	c.cb.calls.Add(1)
	reply := func(stat oncrpc.AcceptStat, body func(e *xdr.Encoder)) []byte {
		rh := oncrpc.AcceptedReply(h.XID, stat)
		b := make([]byte, rh.EncodedLen()+4096)
		e := xdr.NewEncoder(b)
		_ = rh.Encode(&e)
		if body != nil {
			body(&e)
		}
		if e.Err() != nil {
			return nil
		}
		return e.Bytes()
	}
	if h.Prog != CBProgram {
		return reply(oncrpc.ProgUnavail, nil)
	}
	if h.Vers != 1 {
		rh := oncrpc.ProgMismatchReply(h.XID, 1, 1)
		b := make([]byte, rh.EncodedLen())
		e := xdr.NewEncoder(b)
		_ = rh.Encode(&e)
		return e.Bytes()
	}
	switch h.Proc {
	case 0: // CB_NULL
		c.cb.nulls.Add(1)
		return reply(oncrpc.Success, nil)
	case 1: // CB_COMPOUND
		var res xdr.Encoder
		out := make([]byte, 4096)
		res = xdr.NewEncoder(out)
		if !c.cbCompound(call[n:], &res) {
			return reply(oncrpc.GarbageArgs, nil)
		}
		body := res.Bytes()
		return reply(oncrpc.Success, func(e *xdr.Encoder) { e.PutFixedOpaque(body) })
	}
	return reply(oncrpc.ProcUnavail, nil)
}

// cbCompound decodes CB_COMPOUND4args from args and writes
// CB_COMPOUND4res to e; false when the arguments do not decode.
func (c *V4) cbCompound(args []byte, e *xdr.Encoder) bool {
	d := nfsproto.NewDec(args)
	tag := d.Opaque(opaqueLimit)
	minor := d.Uint32()
	d.Uint32() // callback_ident
	nops := d.Uint32()
	if d.Err() != nil || nops > 64 {
		return false
	}
	var results []cbOpRes
	status := uint32(NFS4OK)
	if minor != 1 && minor != 2 {
		status = nfs4ErrMinorVers
	}
	var slot *cbSlot
	for i := uint32(0); i < nops && status == uint32(NFS4OK); i++ {
		op := d.Uint32()
		if d.Err() != nil {
			return c.garbage(slot)
		}
		r, cached := c.cbOp(d, op, i, &slot)
		if cached != nil {
			// A replay: the whole reply as sent before.
			*e = xdr.NewEncoder(make([]byte, len(cached)))
			e.PutFixedOpaque(cached)
			return true
		}
		if d.Err() != nil {
			return c.garbage(slot)
		}
		results = append(results, r)
		status = r.status
	}
	putCBCompoundRes(e, status, tag, results)
	if e.Err() != nil {
		return c.garbage(slot)
	}
	if slot != nil {
		c.cb.mu.Lock()
		slot.reply = append(slot.reply[:0], e.Bytes()...)
		c.cb.mu.Unlock()
	}
	return true
}

// cbOpRes is one operation's result in a CB_COMPOUND reply.
type cbOpRes struct {
	op, status uint32
	body       []byte
}

// cbOp carries out operation op, the i-th of a CB_COMPOUND. A
// CB_SEQUENCE sets *slot to its slot, or returns the cached reply of a
// retransmission.
func (c *V4) cbOp(d *nfsproto.Dec, op, i uint32, slot **cbSlot) (r cbOpRes, cached []byte) {
	r.op = op
	switch op {
	case opCBSequence:
		r.status, *slot, r.body, cached = c.cbSequence(d, i)
	case opCBRecall:
		r.status = c.cbRecall(d)
	case opCBGetattr:
		d.Opaque(fh4Max)
		skipBitmap(d)
		r.status = nfs4ErrNotSupp
	default:
		r.op, r.status = opCBIllegal, nfs4ErrOpIllegal
	}
	if i == 0 && op != opCBSequence && r.status == uint32(NFS4OK) {
		r.status = 10071 // NFS4ERR_OP_NOT_IN_SESSION
	}
	return r, cached
}

// garbage ends a call whose arguments stop decoding. Its CB_SEQUENCE may
// already have advanced the slot: the reply cached there belongs to the
// previous request and must not answer a retransmission of this one
// (which gets RETRY_UNCACHED_REP).
func (c *V4) garbage(slot *cbSlot) bool {
	if slot != nil {
		c.cb.mu.Lock()
		slot.reply = nil
		c.cb.mu.Unlock()
	}
	return false
}

// putCBCompoundRes writes CB_COMPOUND4res.
func putCBCompoundRes(e *xdr.Encoder, status uint32, tag []byte, results []cbOpRes) {
	e.PutUint32(status)
	e.PutOpaque(tag)
	e.PutUint32(uint32(len(results)))
	for _, r := range results {
		e.PutUint32(r.op)
		e.PutUint32(r.status)
		e.PutFixedOpaque(r.body)
	}
}

// cbSequence checks CB_SEQUENCE against the back channel's slot table.
// It returns the status, the slot (when the request is new), the result
// body, or the cached reply of a retransmission.
func (c *V4) cbSequence(d *nfsproto.Dec, idx uint32) (uint32, *cbSlot, []byte, []byte) {
	sid := d.FixedOpaque(sessionIDLen)
	seq := d.Uint32()
	slotID := d.Uint32()
	highest := d.Uint32()
	d.Bool()                                            // cachethis
	for n := d.Uint32(); n > 0 && d.Err() == nil; n-- { // referring_call_lists
		d.FixedOpaque(sessionIDLen)
		for m := d.Uint32(); m > 0 && d.Err() == nil; m-- {
			d.Uint32()
			d.Uint32()
		}
	}
	if d.Err() != nil {
		return 0, nil, nil, nil
	}
	if idx != 0 {
		return 10070, nil, nil, nil // NFS4ERR_SEQUENCE_POS
	}
	if string(sid) != string(c.session[:]) {
		return nfs4ErrBadSession, nil, nil, nil
	}
	cb := c.cb
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if int(slotID) >= len(cb.slots) {
		return nfs4ErrBadSlot, nil, nil, nil
	}
	s := &cb.slots[slotID]
	switch {
	case seq == s.seq+1:
		s.seq = seq
	case seq == s.seq && s.reply != nil:
		return 0, nil, nil, append([]byte(nil), s.reply...)
	case seq == s.seq:
		return nfs4ErrRetryUncached, nil, nil, nil
	default:
		return nfs4ErrSeqMisordered, nil, nil, nil
	}
	var b [sessionIDLen + 16]byte
	copy(b[:], c.session[:])
	binary.BigEndian.PutUint32(b[16:], seq)
	binary.BigEndian.PutUint32(b[20:], slotID)
	binary.BigEndian.PutUint32(b[24:], highest)
	binary.BigEndian.PutUint32(b[28:], uint32(len(cb.slots)-1))
	return uint32(NFS4OK), s, b[:], nil
}

// cbRecall takes CB_RECALL: the delegation is returned in the background.
func (c *V4) cbRecall(d *nfsproto.Dec) uint32 {
	st := d.FixedOpaque(stateidLen)
	d.Bool() // truncate
	d.Opaque(fh4Max)
	if d.Err() != nil {
		return 0
	}
	var other [12]byte
	copy(other[:], st[4:])
	c.cb.mu.Lock()
	dg := c.cb.delegs[other]
	delete(c.cb.delegs, other)
	c.cb.mu.Unlock()
	if dg == nil {
		return nfs4ErrBadStateid
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.DelegReturn(ctx, dg)
		select {
		case c.cb.recalls <- Recall{Delegation: dg, Err: err}:
		default:
		}
	}()
	return uint32(NFS4OK)
}

// DelegReturn returns a delegation (PUTFH, DELEGRETURN).
func (c *V4) DelegReturn(ctx context.Context, dg *Delegation) error {
	if c.cb != nil {
		var other [12]byte
		copy(other[:], dg.Stateid[4:])
		c.cb.mu.Lock()
		delete(c.cb.delegs, other)
		c.cb.mu.Unlock()
	}
	d, err := c.seqCompound(ctx, 200, 2, func(e *xdr.Encoder) {
		putFH(e, dg.FH)
		e.PutUint32(op4DelegRet)
		e.PutFixedOpaque(dg.Stateid[:])
	})
	if err != nil {
		return err
	}
	if err := result(d, op4Putfh); err != nil {
		return err
	}
	return result(d, op4DelegRet)
}

// OpenReadDeleg opens name in dir for reading only and asks for a read
// delegation (OPEN4_SHARE_ACCESS_WANT_READ_DELEG): PUTFH, OPEN, GETFH.
// The delegation is nil when the server granted none.
func (c *V4) OpenReadDeleg(ctx context.Context, dir []byte, name string) (*Open4, *Delegation, error) {
	var owner [8]byte
	binary.BigEndian.PutUint64(owner[:], atomic.AddUint64(&c.ownerSeq, 1)|1<<63)
	d, err := c.seqCompound(ctx, 256+len(name), 3, func(e *xdr.Encoder) {
		putFH(e, dir)
		e.PutUint32(op4Open)
		e.PutUint32(0)
		e.PutUint32(shareAccessRead | shareAccessWantReadDeleg)
		e.PutUint32(0) // deny NONE
		e.PutUint64(c.clientID)
		e.PutOpaque(owner[:])
		e.PutUint32(0) // OPEN4_NOCREATE
		e.PutUint32(0) // CLAIM_NULL
		e.PutString(name)
		e.PutUint32(op4Getfh)
	})
	if err != nil {
		return nil, nil, err
	}
	if err := result(d, op4Putfh); err != nil {
		return nil, nil, err
	}
	if err := result(d, op4Open); err != nil {
		return nil, nil, err
	}
	f := &Open4{}
	copy(f.Stateid[:], d.FixedOpaque(stateidLen))
	d.Bool()
	d.Uint64()
	d.Uint64()
	d.Uint32()
	skipBitmap(d)
	dg := decodeDelegation(d)
	if err := d.Err(); err != nil {
		return nil, nil, err
	}
	if err := result(d, op4Getfh); err != nil {
		return nil, nil, err
	}
	f.FH = append([]byte{}, d.Opaque(fh4Max)...)
	if err := d.Err(); err != nil {
		return nil, nil, err
	}
	if dg != nil {
		dg.FH = f.FH
		c.remember(dg)
	}
	return f, dg, nil
}

// decodeDelegation reads OPEN4resok's open_delegation4: the delegation
// granted, nil if none.
func decodeDelegation(d *nfsproto.Dec) *Delegation {
	var dg *Delegation
	switch kind := d.Uint32(); kind {
	case 1, 2:
		dg = &Delegation{Write: kind == 2}
		copy(dg.Stateid[:], d.FixedOpaque(stateidLen))
		d.Bool()
		if kind == 2 {
			if d.Uint32() == 1 {
				d.Uint64()
			} else {
				d.Uint32()
				d.Uint32()
			}
		}
		d.Uint32()
		d.Uint32()
		d.Uint32()
		d.Opaque(opaqueLimit)
	case 0:
	case 3:
		if why := d.Uint32(); why == 1 || why == 2 {
			d.Bool()
		}
	default:
		d.Fail(nfsproto.ErrBadEnum)
	}
	return dg
}

// remember files dg for the callback service (CB_RECALL finds it by its
// stateid's other part).
func (c *V4) remember(dg *Delegation) {
	if c.cb == nil {
		return
	}
	var other [12]byte
	copy(other[:], dg.Stateid[4:])
	c.cb.mu.Lock()
	c.cb.delegs[other] = dg
	c.cb.mu.Unlock()
}

// putCallbackSec writes csa_sec_parms: AUTH_NONE and AUTH_SYS (uid 0).
func putCallbackSec(e *xdr.Encoder) {
	e.PutUint32(2)
	e.PutUint32(0) // AUTH_NONE
	e.PutUint32(1) // AUTH_SYS: authsys_parms
	e.PutUint32(uint32(time.Now().Unix()))
	e.PutString("rdmagw")
	e.PutUint32(0)
	e.PutUint32(0)
	e.PutUint32(0)
}

// errNoCallbacks: Callbacks set on a transport that cannot serve them.
var errNoCallbacks = errors.New("nfs4: the transport cannot serve callbacks")

// SessionID is the session's ID (after Setup).
func (c *V4) SessionID() [sessionIDLen]byte { return c.session }
