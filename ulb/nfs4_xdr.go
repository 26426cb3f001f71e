package ulb

import (
	"fmt"

	"github.com/rdmagw/rdmagw/xdr"
)

// Sizes of fixed-length NFSv4 XDR types, in bytes on the wire.
const (
	stateidSize    = 16 // stateid4: seqid + other[12]
	verifierSize   = 8  // verifier4
	sessionIDSize  = 16 // sessionid4
	deviceIDSize   = 16 // deviceid4
	nfstimeSize    = 12 // nfstime4: int64 seconds + uint32 nseconds
	changeInfoSize = 20 // change_info4: bool atomic + before + after
	fhMax          = 128
	opaqueLimit    = 1024 // NFS4_OPAQUE_LIMIT
	rpcsecGSS      = 6    // RPCSEC_GSS flavor number
	authNone       = 0
	authSys        = 1
)

// badDiscriminant is a union discriminant that selects no arm of a union
// without a default arm: the bytes are not this union, and skipping on
// would misplace everything after it.
type badDiscriminant struct {
	what   string
	value  uint32
	offset int
}

func (e *badDiscriminant) Error() string {
	return fmt.Sprintf("nfs4: %s has no arm %d (at offset %d)", e.what, e.value, e.offset)
}

// xr reads NFSv4 XDR from the start of a slice, skipping as it goes: a
// walker needs to know where things end, not what they say. The first
// shortfall or malformation stops it and every later read does nothing
// and returns zero, so a layout reads as straight-line code with one
// check at the end.
//
// Every read checks the slice length before decoding and records a
// shortfall in need rather than letting the xdr.Decoder fail: running out
// of bytes mid-operation is the normal case for a message arriving from a
// socket, and that path allocates no error.
type xr struct {
	d    xdr.Decoder
	need int   // > 0: the slice must be at least this long to go on
	err  error // malformed input
}

func (r *xr) reset(b []byte) { *r = xr{}; r.d.Reset(b) }

// ok reports whether nothing has stopped the reading yet.
func (r *xr) ok() bool { return r.need == 0 && r.err == nil }

// off is the current offset in the slice.
func (r *xr) off() int { return r.d.Offset() }

// has reports whether n more bytes are in the slice, recording the need
// if not.
func (r *xr) has(n int) bool {
	if !r.ok() {
		return false
	}
	if r.d.Len() >= n {
		return true
	}
	r.need = r.d.Offset() + n
	return false
}

// fail records malformed input (the first failure wins).
func (r *xr) fail(err error) {
	if r.ok() {
		r.err = err
	}
}

// peek returns the next word without consuming it; has(4) must be true.
func (r *xr) peek() uint32 {
	q := r.d // a Decoder is two words: copying it is the cheap peek
	v, _ := q.Uint32()
	return v
}

func (r *xr) u32() uint32 {
	if !r.has(4) {
		return 0
	}
	v, _ := r.d.Uint32()
	return v
}

// skip passes over n bytes of fixed-size items.
func (r *xr) skip(n int) {
	if r.has(n) {
		_ = r.d.Skip(n)
	}
}

// opaque passes over a variable-length opaque or string of at most max
// bytes (max < 0: no limit of its own).
func (r *xr) opaque(max int) {
	if !r.has(4) {
		return
	}
	n := r.peek()
	if max >= 0 && uint64(n) > uint64(max) {
		r.fail(&xdr.Error{Op: "opaque", Offset: r.off(), Want: int(n), Have: max, Err: xdr.ErrTooLong})
		return
	}
	if r.has(4 + xdr.RoundUp(int(n))) {
		_ = r.d.Skip(4 + xdr.RoundUp(int(n)))
	}
}

// boolean reads a bool that switches a union: anything but 0 or 1 is
// garbage. Plain bool fields are passed over with skip(4), leniently.
func (r *xr) boolean() bool {
	if !r.has(4) {
		return false
	}
	at := r.off()
	v, err := r.d.Bool()
	if err != nil {
		r.fail(&xdr.Error{Op: "bool", Offset: at, Want: int(r.peek()), Err: xdr.ErrBadBool})
	}
	return v
}

// arrayLen reads the count of a counted array of at most max elements
// (max < 0: no limit) of at least minElem bytes each, once the slice
// holds that many.
func (r *xr) arrayLen(max, minElem int) int {
	if !r.has(4) {
		return 0
	}
	n := r.peek()
	if max >= 0 && uint64(n) > uint64(max) {
		r.fail(&xdr.Error{Op: "array count", Offset: r.off(), Want: int(n), Have: max, Err: xdr.ErrTooLong})
		return 0
	}
	if !r.has(4 + int(n)*minElem) {
		return 0
	}
	_, _ = r.d.Uint32()
	return int(n)
}

// bad records a union discriminant v, read just before the current
// offset, that selects no arm.
func (r *xr) bad(what string, v uint32) {
	r.fail(&badDiscriminant{what: what, value: v, offset: r.off() - 4})
}

// failure is why reading stopped, for callers that hold the whole input
// (EstimateReply): a shortfall is then malformed too.
func (r *xr) failure() error {
	if r.err != nil {
		return r.err
	}
	if r.need > 0 {
		return &xdr.Error{Op: "arguments", Offset: r.off(), Want: r.need - r.off(), Have: r.d.Len(), Err: xdr.ErrShort}
	}
	return nil
}

// errOffset is where err happened, for WalkError.
func errOffset(err error, dflt int) int {
	switch e := err.(type) {
	case *xdr.Error:
		return e.Offset
	case *badDiscriminant:
		return e.offset
	case *unknownOp:
		return e.offset
	}
	return dflt
}

// Common NFSv4 types.

// typedef uint32_t bitmap4<>;
func (r *xr) bitmap() {
	n := r.arrayLen(-1, 4)
	r.skip(4 * n)
}

// struct fattr4 { bitmap4 attrmask; attrlist4 attr_vals; };
func (r *xr) fattr() {
	r.bitmap()
	r.opaque(-1)
}

// typedef utf8str_cs component4;  (also utf8str_cis, utf8str_mixed)
func (r *xr) utf8() { r.opaque(-1) }

// typedef opaque nfs_fh4<NFS4_FHSIZE>;
func (r *xr) fh() { r.opaque(fhMax) }

// struct state_owner4 { clientid4 clientid; opaque owner<NFS4_OPAQUE_LIMIT>; };
func (r *xr) stateOwner() {
	r.skip(8)
	r.opaque(opaqueLimit)
}

// struct nfsace4 { acetype4 type; aceflag4 flag; acemask4 access_mask;
//
//	utf8str_mixed who; };
func (r *xr) nfsace() {
	r.skip(12)
	r.utf8()
}

// struct netaddr4 { string na_r_netid<>; string na_r_addr<>; };
func (r *xr) netaddr() {
	r.opaque(-1)
	r.opaque(-1)
}

// union netloc4 switch (netloc_type4 nl_type) {
// case NL4_NAME:    utf8str_cis nl_name;
// case NL4_URL:     utf8str_cis nl_url;
// case NL4_NETADDR: netaddr4    nl_addr;
// };
func (r *xr) netloc() {
	switch t := r.u32(); t {
	case 1, 2:
		r.utf8()
	case 3:
		r.netaddr()
	default:
		r.bad("netloc4", t)
	}
}

// netloc4 list<>
func (r *xr) netlocs() {
	n := r.arrayLen(-1, 8)
	for i := 0; i < n && r.ok(); i++ {
		r.netloc()
	}
}

// opaque list<>  (sec_oid4 lists, gsshandle4_t lists)
func (r *xr) opaques() {
	n := r.arrayLen(-1, 4)
	for i := 0; i < n && r.ok(); i++ {
		r.opaque(-1)
	}
}

// struct state_protect_ops4 { bitmap4 spo_must_enforce; bitmap4 spo_must_allow; };
func (r *xr) stateProtectOps() {
	r.bitmap()
	r.bitmap()
}

// struct nfs_impl_id4 { utf8str_cis nii_domain; utf8str_cs nii_name;
//
//	nfstime4 nii_date; };
//
// nfs_impl_id4 list<1>
func (r *xr) implID() {
	n := r.arrayLen(1, 4+4+nfstimeSize)
	for i := 0; i < n && r.ok(); i++ {
		r.utf8()
		r.utf8()
		r.skip(nfstimeSize)
	}
}

//	struct channel_attrs4 {
//	        count4 ca_headerpadsize, ca_maxrequestsize, ca_maxresponsesize,
//	               ca_maxresponsesize_cached, ca_maxoperations, ca_maxrequests;
//	        uint32_t ca_rdma_ird<1>;
//	};
func (r *xr) channelAttrs() {
	r.skip(24)
	n := r.arrayLen(1, 4)
	r.skip(4 * n)
}

// union callback_sec_parms4 switch (uint32_t cb_secflavor) {
// case AUTH_NONE:  void;
// case AUTH_SYS:   authsys_parms cbsp_sys_cred;
// case RPCSEC_GSS: gss_cb_handles4 cbsp_gss_handles;
// };
// struct authsys_parms { unsigned int stamp; string machinename<255>;
//
//	unsigned int uid; unsigned int gid;
//	unsigned int gids<16>; };
//
// struct gss_cb_handles4 { rpc_gss_svc_t gcbp_service;
//
//	gsshandle4_t gcbp_handle_from_server;
//	gsshandle4_t gcbp_handle_from_client; };
//
// callback_sec_parms4 list<>
func (r *xr) cbSecParms() {
	n := r.arrayLen(-1, 4)
	for i := 0; i < n && r.ok(); i++ {
		switch f := r.u32(); f {
		case authNone:
		case authSys:
			r.skip(4)
			r.opaque(255)
			r.skip(8)
			g := r.arrayLen(16, 4)
			r.skip(4 * g)
		case rpcsecGSS:
			r.skip(4)
			r.opaque(-1)
			r.opaque(-1)
		default:
			r.bad("callback_sec_parms4", f)
		}
	}
}

// union secinfo4 switch (uint32_t flavor) {
// case RPCSEC_GSS: rpcsec_gss_info flavor_info;  (oid<>, qop, service)
// default:         void;
// };
// typedef secinfo4 SECINFO4resok<>;
func (r *xr) secinfos() {
	n := r.arrayLen(-1, 4)
	for i := 0; i < n && r.ok(); i++ {
		if r.u32() == rpcsecGSS {
			r.opaque(-1)
			r.skip(8)
		}
	}
}

//	struct layout_content4 / device_addr4 / layoutupdate4 / layouthint4 {
//	        layouttype4 type; opaque body<>; };
func (r *xr) typedBody() {
	r.skip(4)
	r.opaque(-1)
}

// union open_delegation4 switch (open_delegation_type4 delegation_type) {
// case OPEN_DELEGATE_NONE:     void;
// case OPEN_DELEGATE_READ:     open_read_delegation4 read;
//
//	(stateid4 stateid; bool recall; nfsace4 permissions;)
//
// case OPEN_DELEGATE_WRITE:    open_write_delegation4 write;
//
//	(stateid4 stateid; bool recall; nfs_space_limit4 space_limit;
//	 nfsace4 permissions;)
//
// case OPEN_DELEGATE_NONE_EXT: open_none_delegation4 od_whynone;  (4.1)
// };
// union nfs_space_limit4 switch (limit_by4 limitby) {
// case NFS_LIMIT_SIZE:   uint64_t filesize;
// case NFS_LIMIT_BLOCKS: nfs_modified_limit4 mod_blocks;  (2 x uint32)
// };
// union open_none_delegation4 switch (why_no_delegation4 ond_why) {
// case WND4_CONTENTION: bool ond_server_will_push_deleg;
// case WND4_RESOURCE:   bool ond_server_will_signal_avail;
// default:              void;
// };
func (r *xr) openDelegation() {
	switch t := r.u32(); t {
	case 0:
	case 1:
		r.skip(stateidSize + 4)
		r.nfsace()
	case 2:
		r.skip(stateidSize + 4)
		switch l := r.u32(); l {
		case 1, 2:
			r.skip(8)
		default:
			r.bad("nfs_space_limit4", l)
		}
		r.nfsace()
	case 3:
		switch why := r.u32(); why {
		case 1, 2:
			r.skip(4)
		}
	default:
		r.bad("open_delegation4", t)
	}
}

// struct write_response4 { stateid4 wr_callback_id<1>; length4 wr_count;
//
//	stable_how4 wr_committed; verifier4 wr_writeverf; };
func (r *xr) writeResponse() {
	n := r.arrayLen(1, stateidSize)
	r.skip(n*stateidSize + 8 + 4 + verifierSize)
}
