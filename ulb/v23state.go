package ulb

import (
	"errors"

	"github.com/rdmagw/rdmagw/xdr"
)

// errBadTimeHow: a sattr3 time_how discriminant outside the union's arms,
// so the size of what follows is unknown.
var errBadTimeHow = errors.New("time_how not DONT_CHANGE, SET_TO_SERVER_TIME or SET_TO_CLIENT_TIME")

// v23State is the NFSv2/v3 walkers' position within one message.
//
// An NFSv2 or NFSv3 message holds at most one DDP-eligible item, so the
// walkers need only know whether it has been reported: before that, each
// Next call parses the fixed part from the start of its slice again (it is
// short: at most a file handle, a name and a sattr3); after it, the message
// holds nothing more of interest.
type v23State struct {
	stage int // v23BeforeItem or v23AfterItem
}

const (
	v23BeforeItem = iota // parsing up to the item's length word
	v23AfterItem         // item reported: StepDone next
)

// v23Parse is one attempt at decoding the part of NFSv2/v3 arguments or
// results that precedes the eligible item, from the start of a slice.
//
// Every read checks the slice length first and, when it is short, records
// in need how long the slice must be instead of letting the xdr.Decoder
// fail: a header straddling two socket reads is common, and that path
// should cost no error allocation. The first shortfall or malformation
// stops the attempt; later reads are no-ops.
type v23Parse struct {
	d     xdr.Decoder
	need  int   // > 0: the slice must be at least this long
	err   error // malformed input, found at errAt
	errAt int
}

func (p *v23Parse) reset(b []byte) { *p = v23Parse{}; p.d.Reset(b) }

// ok reports whether the attempt is still going.
func (p *v23Parse) ok() bool { return p.need == 0 && p.err == nil }

// has reports whether n more bytes are in the slice, recording the need
// if not.
func (p *v23Parse) has(n int) bool {
	if !p.ok() {
		return false
	}
	if p.d.Len() >= n {
		return true
	}
	p.need = p.d.Offset() + n
	return false
}

func (p *v23Parse) bad(at int, err error) {
	if p.ok() {
		p.err, p.errAt = err, at
	}
}

// u32 reads an unsigned int (0 once the attempt has stopped).
func (p *v23Parse) u32() uint32 {
	if !p.has(4) {
		return 0
	}
	v, _ := p.d.Uint32()
	return v
}

// skip passes over n bytes of fixed-size items.
func (p *v23Parse) skip(n int) {
	if p.has(n) {
		_ = p.d.Skip(n)
	}
}

// boolean reads a bool (also the discriminant of optional data).
func (p *v23Parse) boolean() bool {
	if !p.has(4) {
		return false
	}
	at := p.d.Offset()
	v, err := p.d.Bool()
	if err != nil {
		p.bad(at, err)
	}
	return v
}

// peekLen returns the next length word without consuming it.
func (p *v23Parse) peekLen() uint32 {
	q := p.d // a Decoder is two words: copying it is the cheap peek
	n, _ := q.Uint32()
	return n
}

// opaque passes over a variable-length opaque or string of at most max
// bytes (max < 0: no limit of its own).
func (p *v23Parse) opaque(max int) {
	if !p.has(4) {
		return
	}
	n := uint64(p.peekLen())
	if max < 0 || n <= uint64(max) {
		if !p.has(4 + xdr.RoundUp(int(n))) {
			return
		}
	}
	at := p.d.Offset()
	if err := p.d.SkipOpaque(max); err != nil {
		p.bad(at, err) // too long
	}
}

// itemLen reads the length word of the eligible item, whose body need not
// be in the slice, and checks it against max (max < 0: no limit).
func (p *v23Parse) itemLen(max int) int {
	if !p.has(4) {
		return 0
	}
	at := p.d.Offset()
	n := p.peekLen()
	if max >= 0 && uint64(n) > uint64(max) {
		p.bad(at, &xdr.Error{Op: "opaque", Offset: at, Want: int(n), Have: max, Err: xdr.ErrTooLong})
		return 0
	}
	_, _ = p.d.Uint32()
	return int(n)
}

// failure is why a stopped attempt stopped, for callers that hold the
// whole input (EstimateReply): a shortfall is then malformed too.
func (p *v23Parse) failure() error {
	if p.err != nil {
		return p.err
	}
	if p.need > 0 {
		return &xdr.Error{Op: "arguments", Offset: p.d.Offset(), Want: p.need - p.d.Offset(), Have: p.d.Len(), Err: xdr.ErrShort}
	}
	return nil
}

// v23Stopped turns a stopped attempt into NeedMore or an error.
func (w *Walker) v23Stopped(p *v23Parse) (Step, error) {
	if p.err != nil {
		return Step{}, w.fail(-1, p.errAt, p.err)
	}
	return Step{Kind: StepNeedMore, Need: p.need}, nil
}

// v23Done ends a message without (further) items after consuming n bytes.
func (w *Walker) v23Done(n int) (Step, error) {
	w.advance(n)
	return Step{Kind: StepDone, Consumed: n}, nil
}

// v23Item ends the attempt at the item's length word: it reads the word
// and reports the item, or says why it cannot.
func (w *Walker) v23Item(p *v23Parse, kind Kind, max int) (Step, error) {
	at := p.d.Offset()
	n := p.itemLen(max)
	if !p.ok() {
		return w.v23Stopped(p)
	}
	w.v23.stage = v23AfterItem
	return Step{
		Kind:     StepItem,
		Consumed: at + 4,
		Item: Item{
			Kind:      kind,
			LenOffset: at,
			Offset:    at + 4,
			Length:    n,
			Pad:       xdr.Pad(n),
			Op:        int(w.Proc),
		},
	}, nil
}

// Reply size estimation for NFSv2/v3 and the auxiliary programs.
//
// Inline counts from the start of the RPC reply header. That header is
// assumed to carry an AUTH_NONE verifier, which is what servers return to
// AUTH_NONE and AUTH_SYS callers (the Linux client's rpcrdma sizing makes
// the same assumption: RPC_REPHDRSIZE plus au_rslack of 2 words):
//
//	xid, msg_type, reply_stat, verf.flavor, verf.length (0), accept_stat
//
// A caller using RPCSEC_GSS adds its verifier (and any integrity or
// privacy wrapping) on top.
const (
	v23ReplyHeader = 6 * 4
	// v23MinReply is the floor of every estimate: an accepted reply with
	// PROG_MISMATCH (header plus low and high versions) is the longest
	// reply a server may send instead of the procedure's results.
	v23MinReply = v23ReplyHeader + 2*4
)

// v23Fixed is the estimate of a reply whose results are at most body bytes
// and hold no eligible item.
func v23Fixed(body int) Estimate {
	return Estimate{Inline: max(v23ReplyHeader+body, v23MinReply)}
}

// v23Guess is the estimate of a reply that cannot be bounded from the call.
func v23Guess(body int) Estimate {
	e := v23Fixed(body)
	e.Unpredictable = true
	return e
}

// v23OneItem is the estimate of a reply whose results are at most body
// bytes besides one eligible item of at most itemMax bytes (its length word
// is part of body: it stays inline when the item moves to a Write chunk).
func v23OneItem(body int, kind Kind, itemMax int) Estimate {
	e := v23Fixed(body)
	e.NItems = 1
	e.ItemKind[0] = kind
	e.ItemMax[0] = itemMax
	return e
}

// v23ArgsError reports arguments that EstimateReply cannot decode. The
// arguments are whole, so a short buffer is as malformed as a bad value.
func v23ArgsError(prog, vers, proc uint32, err error) error {
	at := 0
	if e, ok := err.(*xdr.Error); ok {
		at = e.Offset
	}
	return &WalkError{Prog: prog, Vers: vers, Proc: proc, Op: -1, Offset: at, Err: err}
}
