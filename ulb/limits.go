package ulb

import (
	"encoding/binary"

	"github.com/rdmagw/rdmagw/xdr"
)

// Transfer sizes a server advertises, lowered to what a gateway in front
// of it can carry. A gateway stands in for the server: a client sizes its
// READs, WRITEs and session from these values, so they must be the
// gateway's when those are smaller, or the client sends calls (or asks
// for replies) the gateway must refuse.
//
// The values are rewritten in place in the reply's XDR stream: same
// size, no copy, nothing else touched.

// IOLimits is what a gateway can carry. A zero field lowers nothing.
type IOLimits struct {
	// MaxRead and MaxWrite bound one READ result and one WRITE argument
	// (NFSv3 FSINFO rtmax/rtpref, wtmax/wtpref; NFSv4 maxread, maxwrite).
	MaxRead, MaxWrite uint64
	// MaxRequest and MaxResponse bound one call and one reply (NFSv4.1
	// CREATE_SESSION fore channel ca_maxrequestsize, ca_maxresponsesize
	// and ca_maxresponsesize_cached).
	MaxRequest, MaxResponse uint32
}

// Attribute numbers (RFC 7530 §5.6).
const (
	attrMaxRead  = 30
	attrMaxWrite = 31
)

// CapLimits lowers, in results, every transfer size above lim: the
// FSINFO results of NFSv3, and in an NFSv4 COMPOUND the maxread and
// maxwrite attributes of GETATTR results and the fore channel of
// CREATE_SESSION results. results is the whole reply after its RPC
// header, every READ/READLINK body in place. It returns how many values
// it lowered; replies of other procedures are left alone (0, nil). A
// reply that does not decode is left as far as it decoded, with an error
// wrapping ErrGarbage.
func CapLimits(prog, vers, proc uint32, results []byte, lim *IOLimits) (int, error) {
	if prog != ProgNFS {
		return 0, nil
	}
	switch {
	case vers == 3 && proc == nfs3Fsinfo:
		return capFsinfo3(results, lim)
	case vers == 4 && proc == nfs4ProcCompound:
		return capCompound(results, lim)
	}
	return 0, nil
}

// capFsinfo3: FSINFO3res { nfsstat3 status; post_op_attr obj_attributes;
// (OK:) uint32 rtmax, rtpref, rtmult, wtmax, wtpref, ... }.
func capFsinfo3(b []byte, lim *IOLimits) (int, error) {
	var r xr
	r.Reset(b)
	if r.Uint32() != 0 || !r.OK() {
		if !r.OK() {
			return 0, capError(&r, 3, nfs3Fsinfo)
		}
		return 0, nil
	}
	if r.Bool() {
		r.Skip(84) // fattr3
	}
	at := r.Offset()
	r.Skip(5 * 4)
	if !r.OK() {
		return 0, capError(&r, 3, nfs3Fsinfo)
	}
	n := cap32(b[at:], lim.MaxRead)     // rtmax
	n += cap32(b[at+4:], lim.MaxRead)   // rtpref
	n += cap32(b[at+12:], lim.MaxWrite) // wtmax
	n += cap32(b[at+16:], lim.MaxWrite) // wtpref
	return n, nil
}

// capCompound walks COMPOUND4res as the reply walker does, stopping at
// GETATTR and CREATE_SESSION results.
func capCompound(b []byte, lim *IOLimits) (int, error) {
	var r xr
	r.Reset(b)
	r.Uint32()   // status
	r.Opaque(-1) // tag
	ops := r.ArrayLen(-1, 8)
	n := 0
	for i := 0; i < ops && r.OK(); i++ {
		op := r.Uint32()
		status := r.Uint32()
		switch {
		case status != nfs4OK || !r.OK():
			resultsHead(&r, op, status)
			i = ops // the server stops at the first failure
		case op == opGetattr:
			n += capFattr(&r, b, lim)
		case op == opCreateSession:
			// sessionid4; sequenceid4; uint32_t flags; channel_attrs4 fore, back
			r.Skip(sessionIDSize + 8)
			if at := r.Offset(); r.Has(16) {
				n += cap32(b[at+4:], uint64(lim.MaxRequest))
				n += cap32(b[at+8:], uint64(lim.MaxResponse))
				n += cap32(b[at+12:], uint64(lim.MaxResponse))
			}
			r.channelAttrs()
			r.channelAttrs()
		default:
			if kind, l := resultsHead(&r, op, status); kind != KindNone {
				r.Skip(xdr.RoundUp(int(l)))
			}
		}
	}
	if !r.OK() {
		return n, capError(&r, 4, nfs4ProcCompound)
	}
	return n, nil
}

// capFattr reads a fattr4 and lowers its maxread and maxwrite. The
// attributes before them (numbers 0 to 29) are passed over in order.
func capFattr(r *xr, b []byte, lim *IOLimits) int {
	words := r.ArrayLen(-1, 4)
	var mask uint32
	for w := 0; w < words; w++ {
		if v := r.Uint32(); w == 0 {
			mask = v
		}
	}
	if !r.Has(4) {
		return 0
	}
	l := int(r.Peek())
	start := r.Offset() + 4
	r.Opaque(-1) // attr_vals: the outer reader goes on after it
	if !r.OK() || mask&(1<<attrMaxRead|1<<attrMaxWrite) == 0 {
		return 0
	}
	vals := b[start : start+l]
	var a xr
	a.Reset(vals)
	n := 0
	for bit := 0; bit <= attrMaxWrite && a.OK(); bit++ {
		if mask&(1<<bit) == 0 {
			continue
		}
		switch bit {
		case attrMaxRead, attrMaxWrite:
			at := a.Offset()
			if a.Has(8) {
				m := lim.MaxRead
				if bit == attrMaxWrite {
					m = lim.MaxWrite
				}
				n += cap64(vals[at:], m)
			}
			a.Skip(8)
		case 0: // supported_attrs
			a.bitmap()
		case 12: // acl: nfsace4<>
			k := a.ArrayLen(-1, 16)
			for j := 0; j < k && a.OK(); j++ {
				a.nfsace()
			}
		case 19: // filehandle
			a.fh()
		case 24: // fs_locations
			fsLocations(&a)
		default:
			a.Skip(attrMax[bit])
		}
	}
	if a.Need() == 0 && !a.OK() {
		r.Fail(a.Err())
	}
	return n
}

// fsLocations passes over fs_locations4 { pathname4 fs_root;
// fs_location4 locations<>; }, fs_location4 { utf8str_cis server<>;
// pathname4 rootpath; }, pathname4 being component4<>.
func fsLocations(r *xr) {
	pathname := func() {
		k := r.ArrayLen(-1, 4)
		for j := 0; j < k && r.OK(); j++ {
			r.utf8()
		}
	}
	pathname()
	k := r.ArrayLen(-1, 8)
	for j := 0; j < k && r.OK(); j++ {
		pathname() // server<>: utf8str_cis list, laid out as a pathname4
		pathname()
	}
}

// cap32 lowers the XDR uint32 at b[0:4] to m, if m is set and smaller.
func cap32(b []byte, m uint64) int {
	if m == 0 || uint64(binary.BigEndian.Uint32(b)) <= m {
		return 0
	}
	binary.BigEndian.PutUint32(b, uint32(m))
	return 1
}

// cap64 lowers the XDR uint64 at b[0:8] to m, if m is set and smaller.
func cap64(b []byte, m uint64) int {
	if m == 0 || binary.BigEndian.Uint64(b) <= m {
		return 0
	}
	binary.BigEndian.PutUint64(b, m)
	return 1
}

// capError reports a reply CapLimits could not read to the end.
func capError(r *xr, vers, proc uint32) error {
	return &WalkError{Prog: ProgNFS, Vers: vers, Proc: proc, Op: -1, Offset: errOffset(r.Err(), r.Offset()), Err: r.Err()}
}
