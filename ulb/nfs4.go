package ulb

import (
	"errors"

	"github.com/rdmagw/rdmagw/xdr"
)

// The NFSv4 binding (RFC 8267 §6): program 100003 version 4, minor
// versions 0, 1 and 2, whose only procedures are NULL and COMPOUND.
//
//	struct COMPOUND4args {            struct COMPOUND4res {
//	        utf8str_cs tag;                   nfsstat4   status;
//	        uint32_t   minorversion;          utf8str_cs tag;
//	        nfs_argop4 argarray<>;            nfs_resop4 resarray<>;
//	};                                };
//
// Each nfs_argop4 / nfs_resop4 is an operation number followed by that
// operation's arguments / results (every result starting with its
// nfsstat4). The DDP-eligible items (RFC 8267 §6.1) are WRITE4args data
// and CREATE4args NF4LNK linkdata in calls, READ4resok data and
// READLINK4resok link in replies; Item.Op is the operation's index in
// the COMPOUND. READ_PLUS results are never eligible.
//
// Operations are parsed as the union of all minor versions (RFC 7530,
// RFC 8881, RFC 7862 and the RFC 8276 xattr operations) whatever the
// COMPOUND's minorversion: a server answers an operation its minor
// version lacks with OP_ILLEGAL, or a minorversion it lacks with
// MINOR_VERS_MISMATCH and no results, but the arguments are still XDR of
// a known layout. An operation number no minor version defines cannot be
// skipped, and is malformed input.
//
// A walker step parses whole units, the COMPOUND header or one
// operation's arguments or results (up to its eligible item), and needs
// the whole unit in the slice it is given: a READDIR or GETATTR result is
// read in one piece.
func init() {
	register(ProgNFS, 4, &binding{call: nfs4Call, reply: nfs4Reply, estimate: nfs4Estimate})
}

// NFSv4 procedures.
const (
	nfs4ProcNull     = 0
	nfs4ProcCompound = 1
)

// errNFS4Proc: NFSv4 has no procedure but NULL and COMPOUND.
var errNFS4Proc = errors.New("nfs4: no such procedure")

// nfs4Call walks COMPOUND4args.
func nfs4Call(w *Walker, b []byte) (Step, error) {
	if w.Proc != nfs4ProcCompound {
		return nfs4NotCompound(w)
	}
	s := w.v4
	var r xr
	r.Reset(b)
	if s.stage == v4Header {
		r.Opaque(-1) // tag
		s.minor = r.Uint32()
		s.opsLeft = uint32(r.ArrayLen(-1, 4))
		if !r.OK() {
			return w.nfs4Stop(&r, -1, 0)
		}
		s.stage = v4Ops
	}
	if s.stage == v4CreateTail {
		argsTail(&r, opCreate)
		if !r.OK() {
			return w.nfs4Stop(&r, s.opIndex, 0)
		}
		s.stage = v4Ops
		s.opIndex++
		s.opsLeft--
	}
	for ; s.opsLeft > 0; s.opsLeft-- {
		start := r.Offset()
		op := r.Uint32()
		kind, n := argsHead(&r, op)
		if !r.OK() {
			return w.nfs4Stop(&r, s.opIndex, start)
		}
		if kind != KindNone {
			it := nfs4Item(kind, r.Offset(), n, s.opIndex)
			if op == opCreate {
				s.stage = v4CreateTail // objname and createattrs follow linkdata
			} else {
				s.opIndex++
				s.opsLeft--
			}
			w.v4 = s
			return Step{Kind: StepItem, Consumed: it.Offset, Item: it}, nil
		}
		s.opIndex++
	}
	w.v4 = s
	w.advance(r.Offset())
	return Step{Kind: StepDone, Consumed: r.Offset()}, nil
}

// nfs4Reply walks COMPOUND4res. The server stops at the first operation
// that fails, so the results end there whatever the array count says.
func nfs4Reply(w *Walker, b []byte) (Step, error) {
	if w.Proc != nfs4ProcCompound {
		return nfs4NotCompound(w)
	}
	s := w.v4
	var r xr
	r.Reset(b)
	if s.stage == v4Header {
		s.status = r.Uint32()
		r.Opaque(-1) // tag
		s.opsLeft = uint32(r.ArrayLen(-1, 8))
		if !r.OK() {
			return w.nfs4Stop(&r, -1, 0)
		}
		s.stage = v4Ops
	}
	for s.opsLeft > 0 {
		start := r.Offset()
		op := r.Uint32()
		status := r.Uint32()
		kind, n := resultsHead(&r, op, status)
		if !r.OK() {
			return w.nfs4Stop(&r, s.opIndex, start)
		}
		s.opIndex++
		s.opsLeft--
		if kind != KindNone {
			w.v4 = s
			it := nfs4Item(kind, r.Offset(), n, s.opIndex-1)
			return Step{Kind: StepItem, Consumed: it.Offset, Item: it}, nil
		}
		if status != nfs4OK {
			s.opsLeft = 0
		}
	}
	w.v4 = s
	w.advance(r.Offset())
	return Step{Kind: StepDone, Consumed: r.Offset()}, nil
}

// nfs4NotCompound walks the procedures that are not COMPOUND: NULL has
// empty arguments and results; no other procedure exists.
func nfs4NotCompound(w *Walker) (Step, error) {
	if w.Proc == nfs4ProcNull {
		return Step{Kind: StepDone}, nil
	}
	return Step{}, w.fail(-1, 0, errNFS4Proc)
}

// nfs4Item describes the item whose length word ends at off.
func nfs4Item(kind Kind, off int, n uint32, op int) Item {
	return Item{
		Kind:      kind,
		LenOffset: off - 4,
		Offset:    off,
		Length:    int(n),
		Pad:       xdr.Pad(int(n)),
		Op:        op,
	}
}

// nfs4Stop turns the failure of the unit that started at start into
// StepNeedMore (truncated: the state is left as it was, to parse the unit
// again from the same start) or a WalkError.
func (w *Walker) nfs4Stop(r *xr, op, start int) (Step, error) {
	if r.Need() > 0 {
		return Step{Kind: StepNeedMore, Need: r.Need()}, nil
	}
	err := r.Err()
	return Step{}, w.fail(op, errOffset(err, start), err)
}
