// Package splitter streams one ONC RPC record from a TCP connection into
// an rdmarpc.Message while walking it for DDP-eligible items (ulb): each
// item's body is received from the socket straight into a registered
// pool buffer of its own, and everything else (the RPC header and the
// bytes between and after the items) is copied once into inline memory:
//
//	record:  [ header | args/results .. len | body | pad | .. rest ]
//	message: [ inline ...................... ][ item ]      [ inline ]
//	                                            pool buffer  (pad dropped:
//	                                                          the engine adds it)
//
// Both gateway modes use it: forward mode for a reply from the NFS
// server (TCP) on its way to an RDMA client (inline bytes in registered
// pool buffers, Inline = Registered, so the engine Sends or RDMA-Writes
// them in place), reverse mode for a call from a TCP client on its way to
// an RDMA server (inline bytes in one contiguous Go buffer, Inline =
// Scratch, which the requester copies into its Send buffer and the reply
// planner reads whole; item bodies are exposed as Read chunks).
//
// Pool memory is waited for with rdmarpc.Pool.GetWait: while the pool or
// the connection's quota is used up the socket is not read (TCP
// back-pressure) until memory is released or the context ends.
//
// The walk stops early, and the rest of the record goes inline, when the
// bytes do not walk (Unwalkable), an item is larger than the largest
// pool buffer (TooLarge), the item slots are full (TooMany) or the
// caller's limit on items with a body is reached (BodyLimit); Split
// reports which in its Outcome and the caller decides what that means
// (a fallback counted, or a call refused, RFC 8267 §6.4.1).
//
// Files: splitter.go (all of it); splitter_test.go (reassembly under
// random fragmentation, property and fuzz tests).
package splitter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/tcprpc"
	"github.com/rdmagw/rdmagw/ulb"
)

// Inline says where a record's inline bytes go.
type Inline uint8

const (
	// Registered: registered pool buffers, each a piece of the message as
	// it fills (a buffer holding several pieces is one reference: the
	// message releases it once).
	Registered Inline = iota
	// Scratch: one contiguous Go buffer owned by the Splitter (Scratch),
	// valid until the next Split; the message's inline pieces lie in it.
	Scratch
)

// Config sets a Splitter up. Pool is required.
type Config struct {
	Pool  *rdmarpc.Pool
	Quota *rdmarpc.Quota // charged with every buffer taken (nil: none)
	// Window is the most record bytes the walker is shown at once: the
	// record reader's read-ahead. An item further than that from the
	// previous one (or from the header) ends the walk (Unwalkable).
	Window int
	Inline Inline
	// MaxBodies stops the walk before the item with a body past this
	// many (0: no limit). Items without a body do not count.
	MaxBodies int
	// LocalWait, if set, is true while Split waits for pool memory: the
	// reader is held up on the gateway's side, not by its peer.
	LocalWait *atomic.Bool
	// Ahead, if set (Registered only), is offered each item body of at
	// least 2*AheadMin bytes while it arrives, for cut-through
	// (rdmarpc.Call.WriteAhead). Each read asks for the rest of the body;
	// whenever one returns less (the socket had no more for now, or a
	// record fragment ended: the next read may wait for the peer) with at
	// least AheadMin bytes received and not yet taken, Ahead(item, done,
	// got, buf) is called with the item's index (ulb.Item.Index), the
	// bytes it took so far (done) and the bytes received (got) into buf,
	// whose Bytes is the whole body. It returns the bytes taken now: got
	// when it took Bytes[done:got], done when it declined. The item's
	// piece says in Written how many it took in all. A body that is all
	// there when it is read is never offered, and the rest of any body
	// goes with the message.
	Ahead    func(item, done, got int, buf *rdmarpc.Buffer) int
	AheadMin int
}

// Record names the record Split reads: the current one of the reader,
// whose first HdrLen bytes are an RPC header the caller decoded from a
// Peek.
type Record struct {
	XID              uint32 // the message's
	Dir              ulb.Direction
	Prog, Vers, Proc uint32
	HdrLen           int
	// Walk asks for DDP-eligible items to be looked for; without it (or
	// without a binding for the program) the record goes inline whole.
	Walk bool
}

// Stop says why the walk for items ended before the record did.
type Stop uint8

const (
	Walked     Stop = iota // walked to the end, or not walked at all
	Unwalkable             // bytes that do not decode, a truncated record, or an item beyond the window
	TooLarge               // an item larger than the pool's largest buffer
	TooMany                // more items than a Scratch splitter has slots (ulb.MaxItems)
	BodyLimit              // Config.MaxBodies items with a body taken
)

func (s Stop) String() string {
	switch s {
	case Walked:
		return "walked"
	case Unwalkable:
		return "unwalkable"
	case TooLarge:
		return "too_large"
	case TooMany:
		return "too_many"
	case BodyLimit:
		return "body_limit"
	}
	return fmt.Sprintf("stop(%d)", uint8(s))
}

// Outcome is what Split found besides the message.
type Outcome struct {
	Stop Stop
	// Item is, when the walk stopped, the index (ulb.Item.Index) of the
	// first item that did not become a piece of its own: the item refused
	// (TooLarge, TooMany, BodyLimit) or the next one (Unwalkable).
	Item int
	// Length is the refused item's body length (TooLarge, TooMany,
	// BodyLimit).
	Length int
	// Err is the walker's error (Unwalkable; nil when it needed more
	// bytes than the window or the record holds).
	Err error
	// Lookahead is how many bytes the walker was last shown (Unwalkable).
	Lookahead int
}

// Item is where an item of a Scratch split lies: its body is in Buf (nil
// for an empty body) and follows Scratch()[:At] in the record, whose
// last four bytes are its length word.
type Item struct {
	At  int
	N   int
	Buf *rdmarpc.Buffer
}

// Splitter splits records; it keeps its state from record to record so
// that the steady state allocates nothing. One goroutine uses it.
type Splitter struct {
	cfg  Config
	rr   *tcprpc.RecordReader
	msg  *rdmarpc.Message
	walk ulb.Walker
	// expectItems: items may still follow, so inline buffers are taken
	// small (Registered).
	expectItems bool

	// Registered: the inline buffer being filled.
	cur  *rdmarpc.Buffer
	used int // bytes of cur filled
	// curInMsg: a piece of the message lies in cur, so the message owns
	// the reference Get gave us.
	curInMsg bool
	// open is the index of the inline piece that ends at cur.Bytes[used]
	// and can grow in place, or -1.
	open int

	// Scratch: the inline bytes, and the items between them.
	scratch []byte
	items   [ulb.MaxItems]Item
	nitems  int
}

// New returns a Splitter for cfg.
func New(cfg Config) *Splitter {
	s := &Splitter{cfg: cfg, open: -1}
	if cfg.Inline == Scratch {
		s.scratch = make([]byte, 0, 1024)
	}
	return s
}

// inlineFirstMax is the inline buffer taken while items may follow.
const inlineFirstMax = 4096

// Split reads the rest of rr's current record into msg (Reset first; its
// XID set to r.XID), described by r. On success msg owns every buffer
// its pieces reference (release them with msg.ReleaseBuffers once the
// message is done with); a Scratch split's inline pieces lie in Scratch,
// valid until the next Split. On error nothing is held and msg is
// empty; an error from ctx (the wait for memory) is ctx.Err() wrapped.
func (s *Splitter) Split(ctx context.Context, rr *tcprpc.RecordReader, msg *rdmarpc.Message, r Record) (Outcome, error) {
	s.rr, s.msg = rr, msg
	msg.Reset()
	msg.XID = r.XID
	s.cur, s.used, s.curInMsg, s.open = nil, 0, false, -1
	s.scratch, s.nitems = s.scratch[:0], 0
	out, err := s.fill(ctx, r)
	s.dropCur()
	if err == nil && s.cfg.Inline == Scratch {
		s.buildMessage()
	}
	if err != nil {
		s.release()
	}
	s.rr, s.msg = nil, nil
	return out, err
}

// Scratch is the inline bytes of the last Scratch split: the record
// without its item bodies and their pads.
func (s *Splitter) Scratch() []byte { return s.scratch }

// Items are the items of the last Scratch split, in record order.
func (s *Splitter) Items() []Item { return s.items[:s.nitems] }

// Forget drops the last split's item list (after the message's buffers
// were released).
func (s *Splitter) Forget() {
	clear(s.items[:s.nitems])
	s.nitems = 0
}

// release gives back everything a failed split holds.
func (s *Splitter) release() {
	s.msg.ReleaseBuffers()
	s.msg.Reset()
	for i := range s.nitems {
		if b := s.items[i].Buf; b != nil {
			b.Release()
		}
	}
	s.Forget()
}

func (s *Splitter) fill(ctx context.Context, r Record) (Outcome, error) {
	walk := r.Walk && s.walk.Reset(r.Dir, r.Prog, r.Vers, r.Proc) == nil
	// skip counts record bytes walked but not yet copied: the walk starts
	// after the RPC header, which is copied together with whatever
	// precedes the first item (or with everything, when there is none).
	skip := r.HdrLen
	s.expectItems = walk
	want := min(skip+ulb.FirstPeek, s.cfg.Window)
	bodies := 0
	for walk {
		it, out, done, err := s.nextItem(skip, &want)
		if err != nil {
			return out, err
		}
		if done {
			s.expectItems = false
			return out, s.copyRest(ctx)
		}
		if out := s.stopAt(it, bodies); out.Stop != Walked {
			s.expectItems = false
			return out, s.copyRest(ctx)
		}
		if it.Length > 0 {
			bodies++
		}
		if err := s.place(ctx, skip, it); err != nil {
			return Outcome{}, err
		}
		skip, want = 0, min(ulb.FirstPeek, s.cfg.Window)
	}
	s.expectItems = false
	return Outcome{}, s.copyRest(ctx)
}

// nextItem walks the read-ahead, skip bytes in, on to the next
// DDP-eligible item, widening the window (want) as the walker asks. It
// returns the item, or done and the outcome that ends the walk (Walked
// when the record has no more items), or the connection's error.
func (s *Splitter) nextItem(skip int, want *int) (it ulb.Item, out Outcome, done bool, err error) {
	window := s.cfg.Window
	for {
		p, err := s.rr.Peek(*want)
		if err != nil && err != io.EOF {
			return it, out, true, err
		}
		if len(p) < skip {
			// Cannot happen: the header came from this window.
			return it, Outcome{Stop: Unwalkable, Item: s.walk.Items()}, true, nil
		}
		st, werr := s.walk.Next(p[skip:])
		if werr == nil && st.Kind == ulb.StepNeedMore && err == nil && len(p) < window {
			// Look further ahead, at least doubling the window, so a
			// long result costs a few walks, not one per entry. The
			// window stays small next to a READ payload: most of the
			// payload is received straight into its buffer.
			*want = min(max(skip+st.Need, 2*len(p)), window)
			continue
		}
		if werr != nil || st.Kind == ulb.StepNeedMore {
			// Bytes that do not decode as the procedure's, a truncated
			// record, or a walker that needs more contiguous bytes than
			// the read-ahead holds: the rest goes inline.
			return it, Outcome{Stop: Unwalkable, Item: s.walk.Items(), Err: werr, Lookahead: len(p) - skip}, true, nil
		}
		if st.Kind == ulb.StepDone {
			return it, out, true, nil
		}
		return st.Item, out, false, nil
	}
}

// stopAt says whether the walk must stop before item it (bodies items
// with a body placed so far): too many bodies or items, or a body larger
// than the largest pool buffer. Walked: go on.
func (s *Splitter) stopAt(it ulb.Item, bodies int) Outcome {
	switch {
	case it.Length > 0 && s.cfg.MaxBodies > 0 && bodies == s.cfg.MaxBodies:
		return Outcome{Stop: BodyLimit, Item: it.Index, Length: it.Length}
	case s.cfg.Inline == Scratch && s.nitems == len(s.items):
		return Outcome{Stop: TooMany, Item: it.Index, Length: it.Length}
	case it.Length > s.cfg.Pool.MaxSize():
		return Outcome{Stop: TooLarge, Item: it.Index, Length: it.Length}
	}
	return Outcome{}
}

// place copies the inline bytes before item it (skip bytes walked and
// not copied, up to its offset), receives its body into a buffer of its
// own and discards its XDR pad.
func (s *Splitter) place(ctx context.Context, skip int, it ulb.Item) error {
	if err := s.copyInline(ctx, skip+it.Offset); err != nil {
		return err
	}
	if err := s.item(ctx, it.Index, it.Length); err != nil {
		return fmt.Errorf("item %d: %w", it.Index, err)
	}
	if it.Pad > 0 {
		if _, err := s.rr.Discard(it.Pad); err != nil {
			return fmt.Errorf("pad after item %d: %w", it.Index, err)
		}
	}
	return nil
}

// item receives the body of item index, n bytes, into a buffer of its
// own.
func (s *Splitter) item(ctx context.Context, index, n int) error {
	s.open = -1
	var buf *rdmarpc.Buffer
	written := 0
	if n > 0 {
		var err error
		if buf, err = s.get(ctx, n); err != nil {
			return err
		}
		if written, err = s.receiveBody(index, buf); err != nil {
			buf.Release()
			return err
		}
	}
	if s.cfg.Inline == Scratch {
		s.items[s.nitems] = Item{At: len(s.scratch), N: n, Buf: buf}
		s.nitems++
		return nil
	}
	if buf == nil {
		s.msg.Append(rdmarpc.Piece{Item: true})
	} else {
		s.msg.Append(rdmarpc.Piece{Data: buf.Bytes, Item: true, Buf: buf, Written: written})
	}
	return nil
}

// receiveBody fills buf with the body of item index, offering it to
// Config.Ahead as it arrives; it returns the bytes Ahead took.
func (s *Splitter) receiveBody(index int, buf *rdmarpc.Buffer) (int, error) {
	body := buf.Bytes
	if s.cfg.Ahead == nil || s.cfg.Inline != Registered || len(body) < 2*s.cfg.AheadMin {
		_, err := s.rr.ReadFull(body)
		return 0, err
	}
	done, got := 0, 0
	for got < len(body) {
		m, err := s.rr.Read(body[got:])
		got += m
		if err == io.EOF {
			return done, tcprpc.ErrShortRecord
		}
		if err != nil {
			return done, err
		}
		// A read short of the rest: the next may wait for the backend.
		if got < len(body) && got-done >= s.cfg.AheadMin {
			done = s.cfg.Ahead(index, done, got, buf)
		}
	}
	return done, nil
}

// copyInline moves the record's next n bytes to inline memory.
func (s *Splitter) copyInline(ctx context.Context, n int) error {
	for n > 0 {
		dst, err := s.room(ctx, n)
		if err != nil {
			return err
		}
		dst = dst[:min(n, len(dst))]
		if _, err := s.rr.ReadFull(dst); err != nil {
			return err
		}
		s.commit(len(dst))
		n -= len(dst)
	}
	return nil
}

// copyRest moves whatever is left of the record to inline memory.
func (s *Splitter) copyRest(ctx context.Context) error {
	for {
		left, _ := s.rr.Remaining()
		if left == 0 {
			// Remaining counts only the current fragment: look for more.
			p, err := s.rr.Peek(1)
			if len(p) == 0 {
				if err == io.EOF {
					return nil
				}
				return err
			}
			left, _ = s.rr.Remaining()
		}
		dst, err := s.room(ctx, left)
		if err != nil {
			return err
		}
		n, err := s.rr.Read(dst)
		s.commit(n)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// room returns free inline memory for (up to) want more bytes; commit
// records how much of it was filled.
func (s *Splitter) room(ctx context.Context, want int) ([]byte, error) {
	if s.cfg.Inline == Scratch {
		s.scratch = slices.Grow(s.scratch, want)
		return s.scratch[len(s.scratch):cap(s.scratch)], nil
	}
	if s.cur == nil || s.used == cap(s.cur.Bytes) {
		s.dropCur()
		size := want
		if s.expectItems {
			// Items ahead (a READ): the inline part is small, and the
			// rest of the record is mostly item bodies.
			size = max(want, inlineFirstMax)
		} else if left, _ := s.rr.Remaining(); left > size {
			size = left
		}
		size = min(max(size, 1), s.cfg.Pool.MaxSize())
		buf, err := s.get(ctx, size)
		if err != nil {
			return nil, err
		}
		s.cur, s.used, s.curInMsg, s.open = buf, 0, false, -1
	}
	return s.cur.Bytes[s.used:cap(s.cur.Bytes)], nil
}

// commit adds the n bytes just written at room's start to the message.
func (s *Splitter) commit(n int) {
	if n == 0 {
		return
	}
	if s.cfg.Inline == Scratch {
		s.scratch = s.scratch[:len(s.scratch)+n]
		return
	}
	s.used += n
	if s.open >= 0 {
		p := &s.msg.Pieces[s.open]
		p.Data = p.Data[:len(p.Data)+n]
		return
	}
	s.curInMsg = true
	// The piece may grow in place up to the buffer's end.
	s.msg.Append(rdmarpc.Piece{Data: s.cur.Bytes[s.used-n : s.used : cap(s.cur.Bytes)], Buf: s.cur})
	s.open = len(s.msg.Pieces) - 1
}

// dropCur lets go of the current inline buffer; it goes back to the pool
// unless a piece of the message lies in it.
func (s *Splitter) dropCur() {
	if s.cur != nil && !s.curInMsg {
		s.cur.Release()
	}
	s.cur, s.used, s.curInMsg, s.open = nil, 0, false, -1
}

// buildMessage lays a Scratch split out as pieces: scratch runs between
// the item bodies.
func (s *Splitter) buildMessage() {
	prev := 0
	for i := range s.nitems {
		it := &s.items[i]
		s.msg.Append(rdmarpc.Piece{Data: s.scratch[prev:it.At]})
		if it.Buf != nil {
			s.msg.Append(rdmarpc.Piece{Data: it.Buf.Bytes[:it.N], Item: true, Buf: it.Buf})
		} else {
			s.msg.Append(rdmarpc.Piece{Item: true})
		}
		prev = it.At
	}
	s.msg.Append(rdmarpc.Piece{Data: s.scratch[prev:]})
}

// get takes a pool buffer charged to the quota, waiting while the pool
// or the quota is used up (the socket is not read meanwhile).
func (s *Splitter) get(ctx context.Context, n int) (*rdmarpc.Buffer, error) {
	buf, err := s.cfg.Pool.GetQuota(n, s.cfg.Quota)
	if err == nil || !errors.Is(err, rdmarpc.ErrPoolExhausted) {
		return buf, err
	}
	if lw := s.cfg.LocalWait; lw != nil && !lw.Load() {
		lw.Store(true)
		defer lw.Store(false)
	}
	buf, err = s.cfg.Pool.GetWait(ctx, n, s.cfg.Quota)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("waiting for pool memory: %w", err)
	}
	return buf, err
}
