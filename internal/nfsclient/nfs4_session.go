package nfsclient

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// V4 is a minimal NFSv4.1 client (RFC 8881): one client ID, one session,
// SEQUENCE-based COMPOUNDs over a slot table, and the operations a
// READ/WRITE/GETATTR workload needs. Safe for concurrent use once Setup
// has returned: each COMPOUND holds a slot for its duration.
type V4 struct {
	T Transport
	// Owner names the client to the server (default: host name, pid and
	// time, so concurrent clients never collide).
	Owner string
	// Callbacks makes Setup bind the connection as the session's back
	// channel too and serve the server's callbacks on it
	// (nfs4_callback.go); the transport must be TCP or RDMA.
	Callbacks bool

	// ForeMaxRequest and ForeMaxResponse are the session's fore channel
	// ca_maxrequestsize and ca_maxresponsesize the server granted.
	ForeMaxRequest, ForeMaxResponse uint32

	cb       *cbState      // callback service (nfs4_callback.go)
	seqFlags atomic.Uint32 // sr_status_flags of the latest SEQUENCE
	clientID uint64
	session  [sessionIDLen]byte
	slots    chan *slot
	nslots   int
	ownerSeq uint64
}

// slot is one session slot and the sequence ID of its next request.
type slot struct {
	id  uint32
	seq uint32
}

// maxSlots bounds the slot table we ask for.
const maxSlots = 64

// Setup establishes the client ID and session (EXCHANGE_ID,
// CREATE_SESSION) and tells the server we have no state to reclaim
// (RECLAIM_COMPLETE).
func (c *V4) Setup(ctx context.Context) error {
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("rdmagw-%s-%d-%d", host, os.Getpid(), time.Now().UnixNano())
	}
	if c.Callbacks {
		ct, ok := c.T.(callbackTransport)
		if !ok {
			return errNoCallbacks
		}
		_, slots := ct.backchannelLimits()
		c.cbInit(slots)
		// Before CREATE_SESSION: the server may probe the back channel
		// (CB_NULL) as soon as it exists.
		ct.SetCallbackHandler(c.serveCallback)
	}
	seq, err := c.exchangeID(ctx)
	if err != nil {
		return fmt.Errorf("EXCHANGE_ID: %w", err)
	}
	if err := c.createSession(ctx, seq); err != nil {
		return fmt.Errorf("CREATE_SESSION: %w", err)
	}
	d, err := c.seqCompound(ctx, 16, 1, func(e *xdr.Encoder) {
		e.PutUint32(op4ReclaimDone)
		e.PutBool(false) // rca_one_fs
	})
	if err == nil {
		err = result(d, op4ReclaimDone)
	}
	if err != nil {
		return fmt.Errorf("RECLAIM_COMPLETE: %w", err)
	}
	return nil
}

func (c *V4) exchangeID(ctx context.Context) (uint32, error) {
	var verf [8]byte
	binary.BigEndian.PutUint64(verf[:], uint64(time.Now().UnixNano()))
	d, err := c.compound(ctx, 64+len(c.Owner), 1, func(e *xdr.Encoder) {
		e.PutUint32(op4ExchangeID)
		e.PutFixedOpaque(verf[:])
		e.PutString(c.Owner)
		e.PutUint32(0x00010000) // EXCHGID4_FLAG_USE_NON_PNFS
		e.PutUint32(0)          // state_protect: SP4_NONE
		e.PutUint32(0)          // no client implementation id
	})
	if err != nil {
		return 0, err
	}
	if err := result(d, op4ExchangeID); err != nil {
		return 0, err
	}
	c.clientID = d.Uint64()
	seq := d.Uint32()
	// The rest (flags, state protection, server owner and scope, the
	// implementation id) is not needed.
	return seq, d.Err()
}

// putChannelAttrs writes channel_attrs4.
func putChannelAttrs(e *xdr.Encoder, maxReq, maxResp, maxOps, maxReqs uint32) {
	e.PutUint32(0) // headerpadsize
	e.PutUint32(maxReq)
	e.PutUint32(maxResp)
	e.PutUint32(maxResp) // maxresponsesize_cached
	e.PutUint32(maxOps)
	e.PutUint32(maxReqs)
	e.PutUint32(0) // no rdma_ird
}

func (c *V4) createSession(ctx context.Context, seq uint32) error {
	const big = 1<<20 + 4<<10 // a 1 MiB READ or WRITE with its COMPOUND
	d, err := c.compound(ctx, 200, 1, func(e *xdr.Encoder) {
		e.PutUint32(op4CreateSession)
		e.PutUint64(c.clientID)
		e.PutUint32(seq)
		if c.cb != nil {
			// The back channel on this connection, as big as the
			// transport carries inline (RFC 8267 §6.5.2).
			size, _ := c.T.(callbackTransport).backchannelLimits()
			e.PutUint32(createSessionConnBackChan)
			putChannelAttrs(e, big, big, 16, maxSlots)
			putChannelAttrs(e, uint32(size), uint32(size), 4, uint32(len(c.cb.slots)))
			e.PutUint32(CBProgram)
			putCallbackSec(e)
			return
		}
		e.PutUint32(0) // flags: no persistence, no back channel
		putChannelAttrs(e, big, big, 16, maxSlots)
		putChannelAttrs(e, 4096, 4096, 2, 1)
		e.PutUint32(CBProgram) // cb_program (unused: no back channel)
		e.PutUint32(1)         // one callback security parameter:
		e.PutUint32(0)         // AUTH_NONE
	})
	if err != nil {
		return err
	}
	if err := result(d, op4CreateSession); err != nil {
		return err
	}
	copy(c.session[:], d.FixedOpaque(sessionIDLen))
	d.Uint32() // csr_sequence
	d.Uint32() // csr_flags
	// Fore channel attributes: maxrequests is the slot count we got.
	d.Uint32() // headerpadsize
	c.ForeMaxRequest = d.Uint32()
	c.ForeMaxResponse = d.Uint32()
	d.Uint32()
	d.Uint32()
	n := d.Uint32()
	if err := d.Err(); err != nil {
		return err
	}
	c.nslots = int(min(max(n, 1), maxSlots))
	c.slots = make(chan *slot, c.nslots)
	for i := range c.nslots {
		c.slots <- &slot{id: uint32(i), seq: 1}
	}
	return nil
}

// seqCompound runs a COMPOUND of SEQUENCE and n more operations written
// by put, on a free slot, and returns the decoder positioned after the
// SEQUENCE result.
func (c *V4) seqCompound(ctx context.Context, size, n int, put func(e *xdr.Encoder)) (*nfsproto.Dec, error) {
	if c.slots == nil {
		return nil, errNoSession
	}
	var s *slot
	select {
	case s = <-c.slots:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d, err := c.compound(ctx, size+48, n+1, func(e *xdr.Encoder) {
		e.PutUint32(op4Sequence)
		e.PutFixedOpaque(c.session[:])
		e.PutUint32(s.seq)
		e.PutUint32(s.id)
		e.PutUint32(uint32(c.nslots - 1)) // highest slot we use
		e.PutBool(false)                  // cachethis
		put(e)
	})
	if err != nil {
		// Whether the server saw the request is unknown, so the slot's
		// next sequence ID is too: retire the slot rather than risk
		// NFS4ERR_SEQ_MISORDERED on every later use.
		return nil, err
	}
	if err := result(d, op4Sequence); err != nil {
		c.slots <- s // the server did not process it: same seqid again
		return nil, err
	}
	d.FixedOpaque(sessionIDLen)
	for range 4 { // sequenceid, slotid, highest_slotid, target_highest
		d.Uint32()
	}
	c.seqFlags.Store(d.Uint32()) // sr_status_flags
	s.seq++
	c.slots <- s
	return d, d.Err()
}

// DestroySession ends the session and the client ID.
func (c *V4) DestroySession(ctx context.Context) error {
	if c.slots == nil {
		return errNoSession
	}
	d, err := c.compound(ctx, 32, 1, func(e *xdr.Encoder) {
		e.PutUint32(op4DestroySession)
		e.PutFixedOpaque(c.session[:])
	})
	if err == nil {
		err = result(d, op4DestroySession)
	}
	if err != nil {
		return fmt.Errorf("DESTROY_SESSION: %w", err)
	}
	c.slots = nil
	d, err = c.compound(ctx, 16, 1, func(e *xdr.Encoder) {
		e.PutUint32(op4DestroyClient)
		e.PutUint64(c.clientID)
	})
	if err == nil {
		err = result(d, op4DestroyClient)
	}
	if err != nil {
		return fmt.Errorf("DESTROY_CLIENTID: %w", err)
	}
	return nil
}
