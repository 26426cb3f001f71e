package ulb

import (
	"github.com/rdmagw/rdmagw/xdr"
)

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

// v23Stopped turns a stopped attempt into NeedMore or an error. Each
// attempt parses the part of NFSv2/v3 arguments or results that precedes
// the eligible item from the start of its slice: it is short (at most a
// file handle, a name and a sattr3).
func (w *Walker) v23Stopped(p *xr) (Step, error) {
	if p.Need() > 0 {
		return Step{Kind: StepNeedMore, Need: p.Need()}, nil
	}
	err := p.Err()
	return Step{}, w.fail(-1, errOffset(err, p.Offset()), err)
}

// v23Done ends a message without (further) items after consuming n bytes.
func (w *Walker) v23Done(n int) (Step, error) {
	w.advance(n)
	return Step{Kind: StepDone, Consumed: n}, nil
}

// v23Item ends the attempt at the item's length word: it reads the word
// and reports the item, or says why it cannot.
func (w *Walker) v23Item(p *xr, kind Kind, max int) (Step, error) {
	at := p.Offset()
	n := p.Length(max)
	if !p.OK() {
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
