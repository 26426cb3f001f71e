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
	return fmt.Sprintf("%s has no arm %d (at offset %d)", e.what, e.value, e.offset)
}

// xr reads NFSv2, v3 and v4 XDR from the start of a slice, skipping as it
// goes: a walker needs to know where things end, not what they say. It is
// xdr.Reader (sticky stop, a shortfall recorded in Need without an error
// allocated: running out of bytes mid-operation is the normal case for a
// message arriving from a socket) plus the NFSv4 types below.
type xr struct{ xdr.Reader }

// bad records a union discriminant v, read just before the current
// offset, that selects no arm.
func (r *xr) bad(what string, v uint32) {
	r.Fail(&badDiscriminant{what: what, value: v, offset: r.Offset() - 4})
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
	n := r.ArrayLen(-1, 4)
	r.Skip(4 * n)
}

// struct fattr4 { bitmap4 attrmask; attrlist4 attr_vals; };
func (r *xr) fattr() {
	r.bitmap()
	r.Opaque(-1)
}

// typedef utf8str_cs component4;  (also utf8str_cis, utf8str_mixed)
func (r *xr) utf8() { r.Opaque(-1) }

// opaque <>, of any length (xattrvalue4, adb_pattern, ...)
func (r *xr) anyOpaque() { r.Opaque(-1) }

// typedef opaque nfs_fh4<NFS4_FHSIZE>;
func (r *xr) fh() { r.Opaque(fhMax) }

// struct state_owner4 { clientid4 clientid; opaque owner<NFS4_OPAQUE_LIMIT>; };
func (r *xr) stateOwner() {
	r.Skip(8)
	r.Opaque(opaqueLimit)
}

// struct nfsace4 { acetype4 type; aceflag4 flag; acemask4 access_mask;
//
//	utf8str_mixed who; };
func (r *xr) nfsace() {
	r.Skip(12)
	r.utf8()
}

// struct netaddr4 { string na_r_netid<>; string na_r_addr<>; };
func (r *xr) netaddr() {
	r.Opaque(-1)
	r.Opaque(-1)
}

// union netloc4 switch (netloc_type4 nl_type) {
// case NL4_NAME:    utf8str_cis nl_name;
// case NL4_URL:     utf8str_cis nl_url;
// case NL4_NETADDR: netaddr4    nl_addr;
// };
func (r *xr) netloc() {
	switch t := r.Uint32(); t {
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
	n := r.ArrayLen(-1, 8)
	for i := 0; i < n && r.OK(); i++ {
		r.netloc()
	}
}

// opaque list<>  (sec_oid4 lists, gsshandle4_t lists)
func (r *xr) opaques() {
	n := r.ArrayLen(-1, 4)
	for i := 0; i < n && r.OK(); i++ {
		r.Opaque(-1)
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
	n := r.ArrayLen(1, 4+4+nfstimeSize)
	for i := 0; i < n && r.OK(); i++ {
		r.utf8()
		r.utf8()
		r.Skip(nfstimeSize)
	}
}

//	struct channel_attrs4 {
//	        count4 ca_headerpadsize, ca_maxrequestsize, ca_maxresponsesize,
//	               ca_maxresponsesize_cached, ca_maxoperations, ca_maxrequests;
//	        uint32_t ca_rdma_ird<1>;
//	};
func (r *xr) channelAttrs() {
	r.Skip(24)
	n := r.ArrayLen(1, 4)
	r.Skip(4 * n)
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
	n := r.ArrayLen(-1, 4)
	for i := 0; i < n && r.OK(); i++ {
		switch f := r.Uint32(); f {
		case authNone:
		case authSys:
			r.Skip(4)
			r.Opaque(255)
			r.Skip(8)
			g := r.ArrayLen(16, 4)
			r.Skip(4 * g)
		case rpcsecGSS:
			r.Skip(4)
			r.Opaque(-1)
			r.Opaque(-1)
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
	n := r.ArrayLen(-1, 4)
	for i := 0; i < n && r.OK(); i++ {
		if r.Uint32() == rpcsecGSS {
			r.Opaque(-1)
			r.Skip(8)
		}
	}
}

//	struct layout_content4 / device_addr4 / layoutupdate4 / layouthint4 {
//	        layouttype4 type; opaque body<>; };
func (r *xr) typedBody() {
	r.Skip(4)
	r.Opaque(-1)
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
	switch t := r.Uint32(); t {
	case 0:
	case 1:
		r.Skip(stateidSize + 4)
		r.nfsace()
	case 2:
		r.Skip(stateidSize + 4)
		switch l := r.Uint32(); l {
		case 1, 2:
			r.Skip(8)
		default:
			r.bad("nfs_space_limit4", l)
		}
		r.nfsace()
	case 3:
		switch why := r.Uint32(); why {
		case 1, 2:
			r.Skip(4)
		}
	default:
		r.bad("open_delegation4", t)
	}
}

// struct write_response4 { stateid4 wr_callback_id<1>; length4 wr_count;
//
//	stable_how4 wr_committed; verifier4 wr_writeverf; };
func (r *xr) writeResponse() {
	n := r.ArrayLen(1, stateidSize)
	r.Skip(n*stateidSize + 8 + 4 + verifierSize)
}
