package ulb

import "fmt"

// unknownOp is an operation number no NFSv4 minor version defines: its
// arguments or results cannot be skipped, so the rest of the COMPOUND is
// unreadable. (A server answers such an op with OP_ILLEGAL, but a walker
// that has to find the end of its arguments can only give up.)
type unknownOp struct {
	op     uint32
	offset int
}

func (e *unknownOp) Error() string {
	return fmt.Sprintf("nfs4: unknown operation %d (at offset %d)", e.op, e.offset)
}

// argsHead skips the arguments (nfs_argop4 arm) of operation op, whose
// number has just been read. For the two operations with a DDP-eligible
// argument it stops right after that item's length word and returns the
// item's kind and length; the caller then skips or lands the body and,
// for CREATE, calls argsTail. Every other operation is skipped as
// nfs4Args says.
//
// Unions are parsed as the superset of all minor versions: arms added in
// 4.1 (CLAIM_FH, EXCLUSIVE4_1, ...) have discriminants that 4.0 leaves
// unused, so no layout depends on the COMPOUND's minorversion.
func argsHead(r *xr, op uint32) (Kind, uint32) {
	switch {
	case op == opWrite:
		// stateid4 stateid; offset4 offset; stable_how4 stable; opaque data<>
		r.Skip(stateidSize + 12)
		return KindWriteData, r.Uint32()
	case op == opCreate:
		return createHead(r)
	case !nfs4Args.skip(r, op):
		r.Fail(&unknownOp{op: op, offset: r.Offset() - 4})
	}
	return KindNone, 0
}

// opSkip is how to skip one operation's arguments or results: a run of
// fixed-size fields (fixed bytes, read as one Skip), then the rest, if
// any, in up to two steps. The zero opSkip skips nothing: a void arm.
//
// Steps take and return the reader by value: a reader passed by pointer
// to a function the compiler cannot see would escape, and every walk
// would allocate it.
type opSkip struct {
	fixed      int
	rest, then func(xr) xr
}

// opTable holds an opSkip for each operation number up to the last one
// defined; OP_ILLEGAL is void in both directions.
type opTable [opRemoveXattr + 1]opSkip

// skip skips op as t says. It reports false, reading nothing, for an
// operation number no minor version defines.
func (t *opTable) skip(r *xr, op uint32) bool {
	if op == opIllegal {
		return true
	}
	if !knownOp(op) {
		return false
	}
	s := &t[op]
	if s.fixed > 0 {
		r.Skip(s.fixed)
	}
	if s.rest != nil {
		*r = s.rest(*r)
	}
	if s.then != nil {
		*r = s.then(*r)
	}
	return true
}

// Rest steps that are one common NFSv4 type (nfs4_xdr.go).
func anyOpaqueStep(r xr) xr      { r.anyOpaque(); return r }
func bitmapStep(r xr) xr         { r.bitmap(); return r }
func cbSecParmsStep(r xr) xr     { r.cbSecParms(); return r }
func channelAttrsStep(r xr) xr   { r.channelAttrs(); return r }
func fattrStep(r xr) xr          { r.fattr(); return r }
func fhStep(r xr) xr             { r.fh(); return r }
func netlocStep(r xr) xr         { r.netloc(); return r }
func netlocsStep(r xr) xr        { r.netlocs(); return r }
func openDelegationStep(r xr) xr { r.openDelegation(); return r }
func secinfosStep(r xr) xr       { r.secinfos(); return r }
func stateOwnerStep(r xr) xr     { r.stateOwner(); return r }
func typedBodyStep(r xr) xr      { r.typedBody(); return r }
func utf8Step(r xr) xr           { r.utf8(); return r }
func writeResponseStep(r xr) xr  { r.writeResponse(); return r }

// nfs4Args is the layout of every NFSv4 operation's arguments but WRITE
// and CREATE (argsHead). Operations not listed have void arguments:
// GETFH, LOOKUPP, PUTPUBFH, PUTROOTFH, READLINK, RESTOREFH, SAVEFH.
var nfs4Args = opTable{
	opAccess:          {fixed: 4}, // uint32_t access
	opOpenAttr:        {fixed: 4}, // bool createdir
	opSecinfoNoName:   {fixed: 4}, // secinfo_style4
	opReclaimComplete: {fixed: 4}, // bool rca_one_fs

	opDelegPurge:      {fixed: 8}, // clientid4
	opRenew:           {fixed: 8}, // clientid4
	opDestroyClientID: {fixed: 8}, // clientid4

	opCommit:     {fixed: 12}, // offset4 offset; count4 count
	opListXattrs: {fixed: 12}, // nfs_cookie4 lxa_cookie; count4 lxa_maxcount

	opDelegReturn:    {fixed: stateidSize},   // stateid4
	opFreeStateID:    {fixed: stateidSize},   // stateid4
	opOffloadCancel:  {fixed: stateidSize},   // stateid4
	opOffloadStatus:  {fixed: stateidSize},   // stateid4
	opDestroySession: {fixed: sessionIDSize}, // sessionid4

	opClose:              {fixed: 4 + stateidSize},  // seqid4 seqid; stateid4 open_stateid
	opOpenConfirm:        {fixed: stateidSize + 4},  // stateid4 open_stateid; seqid4 seqid
	opOpenDowngrade:      {fixed: stateidSize + 12}, // stateid4; seqid4; share_access; share_deny
	opSetClientIDConfirm: {fixed: 8 + verifierSize}, // clientid4; verifier4

	// stateid4 stateid; offset4 offset; count4 count (READ_PLUS: the same)
	opRead:     {fixed: stateidSize + 12},
	opReadPlus: {fixed: stateidSize + 12},
	// stateid4 sa_stateid; offset4 sa_offset; data_content4 sa_what
	opSeek: {fixed: stateidSize + 12},
	// locktype; seqid4; stateid4; offset4; length4
	opLockU: {fixed: 8 + stateidSize + 16},
	// stateid4; offset4; length4
	opAllocate:   {fixed: stateidSize + 16},
	opDeallocate: {fixed: stateidSize + 16},
	// stateid4 src, dst; offset4 src, dst; length4 count
	opClone: {fixed: 2*stateidSize + 24},
	// sessionid4; sequenceid4; slotid4; slotid4 highest; bool cachethis
	opSequence: {fixed: sessionIDSize + 16},
	// sessionid4; channel_dir_from_client4; bool use_conn_in_rdma_mode
	opBindConnToSession: {fixed: sessionIDSize + 8},
	// layouttype4; count4 maxdevices; nfs_cookie4; verifier4
	opGetDeviceList: {fixed: 8 + 8 + verifierSize},
	// bool signal_layout_avail; layouttype4; layoutiomode4; offset4;
	// length4 length; length4 minlength; stateid4; count4 maxcount
	opLayoutGet: {fixed: 12 + 24 + stateidSize + 4},

	opLookup:      {rest: utf8Step},                 // component4
	opLink:        {rest: utf8Step},                 // component4
	opRemove:      {rest: utf8Step},                 // component4
	opSecinfo:     {rest: utf8Step},                 // component4
	opGetXattr:    {rest: utf8Step},                 // xattrkey4
	opRemoveXattr: {rest: utf8Step},                 // xattrkey4
	opRename:      {rest: utf8Step, then: utf8Step}, // component4 oldname, newname
	opPutFH:       {rest: fhStep},                   // nfs_fh4 object
	opGetattr:     {rest: bitmapStep},               // bitmap4 attr_request
	opVerify:      {rest: fattrStep},                // fattr4 obj_attributes
	opNVerify:     {rest: fattrStep},                // fattr4 obj_attributes
	// stateid4 stateid; fattr4 obj_attributes
	opSetattr: {fixed: stateidSize, rest: fattrStep},
	// nfs_cookie4; verifier4; count4 dircount; count4 maxcount; bitmap4
	opReaddir:          {fixed: 8 + verifierSize + 8, rest: bitmapStep},
	opReleaseLockOwner: {rest: stateOwnerStep}, // lock_owner4
	opLock:             {rest: lockArgs},
	// nfs_lock_type4 locktype; offset4; length4; lock_owner4 owner
	opLockT: {fixed: 4 + 16, rest: stateOwnerStep},
	opOpen:  {rest: openArgs},
	// verifier4, then the rest of SETCLIENTID4args
	opSetClientID: {fixed: verifierSize, rest: setClientIDArgs},
	// uint32_t bca_cb_program; callback_sec_parms4 bca_sec_parms<>
	opBackchannelCtl: {fixed: 4, rest: cbSecParmsStep},
	opExchangeID:     {rest: exchangeIDArgs},
	// clientid4; sequenceid4; uint32_t flags; then createSessionArgs
	opCreateSession: {fixed: 8 + 4 + 4, rest: createSessionArgs},
	// bool signal_deleg_avail; then getDirDelegationArgs
	opGetDirDelegation: {fixed: 4, rest: getDirDelegationArgs},
	// deviceid4; layouttype4; count4 maxcount; bitmap4 notify_types
	opGetDeviceInfo: {fixed: deviceIDSize + 8, rest: bitmapStep},
	opLayoutCommit:  {rest: layoutCommitArgs},
	// bool reclaim; layouttype4; layoutiomode4; then layoutReturnArgs
	opLayoutReturn: {fixed: 12, rest: layoutReturnArgs},
	opSetSSV:       {rest: anyOpaqueStep, then: anyOpaqueStep}, // opaque ssa_ssv<>; opaque ssa_digest<>
	opTestStateID:  {rest: testStateIDArgs},
	// uint32_t wda_want; then delegClaimArgs
	opWantDelegation: {fixed: 4, rest: delegClaimArgs},
	// stateid4 src, dst; offset4 src, dst; length4 count;
	// bool consecutive; bool synchronous; netloc4 ca_source_server<>
	opCopy: {fixed: 2*stateidSize + 24 + 8, rest: netlocsStep},
	// stateid4 cna_src_stateid; netloc4 cna_destination_server
	opCopyNotify: {fixed: stateidSize, rest: netlocStep},
	// stateid4; offset4; length4 count; bitmap4 hints
	opIOAdvise: {fixed: stateidSize + 16, rest: bitmapStep},
	// offset4; length4; stateid4; then deviceErrors
	opLayoutError: {fixed: 16 + stateidSize, rest: deviceErrors},
	// offset4; length4; stateid4; io_info4 read, write (2 x uint64 each);
	// deviceid4; layoutupdate4
	opLayoutStats: {fixed: 16 + stateidSize + 32 + deviceIDSize, rest: typedBodyStep},
	// stateid4; stable_how4; app_data_block4 wsa_adb:
	// (offset4, length4 block_size, length4 block_count,
	//  length4 reloff_blocknum, count4 block_num, length4 reloff_pattern,
	//  opaque adb_pattern<>)
	opWriteSame: {fixed: stateidSize + 4 + 8 + 8 + 8 + 8 + 4 + 8, rest: anyOpaqueStep},
	// setxattr_option4 sxa_option; xattrkey4 sxa_key; xattrvalue4 sxa_value
	opSetXattr: {fixed: 4, rest: utf8Step, then: anyOpaqueStep},
}

// setClientIDArgs skips SETCLIENTID4args after the client's verifier4:
// nfs_client_id4 client (verifier4, opaque id<1024>); cb_client4 callback
// (uint32 cb_program, netaddr4 cb_location); uint32_t callback_ident.
func setClientIDArgs(r xr) xr {
	r.Opaque(opaqueLimit)
	r.Skip(4)
	r.netaddr()
	r.Skip(4)
	return r
}

// createSessionArgs skips CREATE_SESSION4args after its fixed head:
// channel_attrs4 fore, back; uint32_t cb_program;
// callback_sec_parms4 csa_sec_parms<>.
func createSessionArgs(r xr) xr {
	r.channelAttrs()
	r.channelAttrs()
	r.Skip(4)
	r.cbSecParms()
	return r
}

// getDirDelegationArgs skips GET_DIR_DELEGATION4args after
// signal_deleg_avail: bitmap4 notification_types; attr_notice4
// child_attr_delay, dir_attr_delay (nfstime4); bitmap4 child_attributes;
// bitmap4 dir_attributes.
func getDirDelegationArgs(r xr) xr {
	r.bitmap()
	r.Skip(2 * nfstimeSize)
	r.bitmap()
	r.bitmap()
	return r
}

// layoutReturnArgs skips the layoutreturn4 of LAYOUTRETURN4args:
//
//	union layoutreturn4 switch (layoutreturn_type4 lr_returntype) {
//	case LAYOUTRETURN4_FILE: layoutreturn_file4 lr_layout;
//	        (offset4, length4, stateid4, opaque lrf_body<>)
//	default: void; };
func layoutReturnArgs(r xr) xr {
	if r.Uint32() == 1 {
		r.Skip(16 + stateidSize)
		r.Opaque(-1)
	}
	return r
}

// testStateIDArgs: stateid4 ts_stateids<>.
func testStateIDArgs(r xr) xr {
	n := r.ArrayLen(-1, stateidSize)
	r.Skip(n * stateidSize)
	return r
}

// delegClaimArgs skips the deleg_claim4 of WANT_DELEGATION4args:
//
//	union deleg_claim4 switch (open_claim_type4 dc_claim) {
//	case CLAIM_FH: void; case CLAIM_DELEG_PREV_FH: void;
//	case CLAIM_PREVIOUS: open_delegation_type4 dc_delegate_type; };
func delegClaimArgs(r xr) xr {
	switch c := r.Uint32(); c {
	case 4, 6:
	case 1:
		r.Skip(4)
	default:
		r.bad("deleg_claim4", c)
	}
	return r
}

// deviceErrors skips LAYOUTERROR4args' device_error4 lea_errors<>:
// struct device_error4 { deviceid4; nfsstat4; nfs_opnum4; }.
func deviceErrors(r xr) xr {
	n := r.ArrayLen(-1, deviceIDSize+8)
	r.Skip(n * (deviceIDSize + 8))
	return r
}

// nf4lnk is the nfs_ftype4 of a symbolic link.
const nf4lnk = 5

// createHead skips CREATE4args up to the linkdata of an NF4LNK:
//
//	union createtype4 switch (nfs_ftype4 type) {
//	case NF4LNK:          linktext4 linkdata;     <- DDP-eligible
//	case NF4BLK, NF4CHR:  specdata4 devdata;      (2 x uint32)
//	default:              void;
//	};
//	struct CREATE4args { createtype4 objtype; component4 objname;
//	                     fattr4 createattrs; };
//
// For other types it skips the whole arguments.
func createHead(r *xr) (Kind, uint32) {
	switch r.Uint32() {
	case nf4lnk:
		return KindSymlinkPath, r.Uint32()
	case 3, 4: // NF4BLK, NF4CHR
		r.Skip(8)
	}
	argsTail(r, opCreate)
	return KindNone, 0
}

// argsTail skips what follows the DDP-eligible item of op's arguments.
func argsTail(r *xr, op uint32) {
	if op == opCreate {
		r.utf8()  // objname
		r.fattr() // createattrs
	}
	// WRITE4args: the data is the last field.
}

// lockArgs skips LOCK4args:
//
//	struct LOCK4args { nfs_lock_type4 locktype; bool reclaim; offset4 offset;
//	                   length4 length; locker4 locker; };
//	union locker4 switch (bool new_lock_owner) {
//	case TRUE:  open_to_lock_owner4 open_owner;
//	        (seqid4 open_seqid; stateid4 open_stateid; seqid4 lock_seqid;
//	         lock_owner4 lock_owner)
//	case FALSE: exist_lock_owner4 lock_owner;  (stateid4; seqid4)
//	};
func lockArgs(r xr) xr {
	r.Skip(8 + 16)
	if r.Bool() {
		r.Skip(4 + stateidSize + 4)
		r.stateOwner()
	} else {
		r.Skip(stateidSize + 4)
	}
	return r
}

// openArgs skips OPEN4args:
//
//	struct OPEN4args { seqid4 seqid; uint32_t share_access;
//	                   uint32_t share_deny; open_owner4 owner;
//	                   openflag4 openhow; open_claim4 claim; };
//	union openflag4 switch (opentype4 opentype) {
//	case OPEN4_CREATE: createhow4 how;
//	default:           void;
//	};
//	union createhow4 switch (createmode4 mode) {
//	case UNCHECKED4, GUARDED4: fattr4 createattrs;
//	case EXCLUSIVE4:           verifier4 createverf;
//	case EXCLUSIVE4_1:         creatverfattr ch_createboth; (verifier4, fattr4)
//	};
//	union open_claim4 switch (open_claim_type4 claim) {
//	case CLAIM_NULL:          component4 file;
//	case CLAIM_PREVIOUS:      open_delegation_type4 delegate_type;
//	case CLAIM_DELEGATE_CUR:  open_claim_delegate_cur4 (stateid4, component4);
//	case CLAIM_DELEGATE_PREV: component4 file_delegate_prev;
//	case CLAIM_FH:            void;
//	case CLAIM_DELEG_CUR_FH:  stateid4 oc_delegate_stateid;
//	case CLAIM_DELEG_PREV_FH: void;
//	};
func openArgs(r xr) xr {
	r.Skip(12)
	r.stateOwner()
	if r.Uint32() == 1 { // OPEN4_CREATE
		switch m := r.Uint32(); m {
		case 0, 1:
			r.fattr()
		case 2:
			r.Skip(verifierSize)
		case 3:
			r.Skip(verifierSize)
			r.fattr()
		default:
			r.bad("createhow4", m)
		}
	}
	switch c := r.Uint32(); c {
	case 0, 3:
		r.utf8()
	case 1:
		r.Skip(4)
	case 2:
		r.Skip(stateidSize)
		r.utf8()
	case 4, 6:
	case 5:
		r.Skip(stateidSize)
	default:
		r.bad("open_claim4", c)
	}
	return r
}

// exchangeIDArgs skips EXCHANGE_ID4args:
//
//	struct EXCHANGE_ID4args { client_owner4 eia_clientowner;
//	        (verifier4, opaque co_ownerid<NFS4_OPAQUE_LIMIT>)
//	        uint32_t eia_flags; state_protect4_a eia_state_protect;
//	        nfs_impl_id4 eia_client_impl_id<1>; };
//	union state_protect4_a switch (state_protect_how4 spa_how) {
//	case SP4_NONE:      void;
//	case SP4_MACH_CRED: state_protect_ops4 spa_mach_ops;
//	case SP4_SSV:       ssv_sp_parms4 spa_ssv_parms;
//	        (state_protect_ops4; sec_oid4 hash_algs<>; sec_oid4 encr_algs<>;
//	         uint32_t window; uint32_t num_gss_handles)
//	};
func exchangeIDArgs(r xr) xr {
	r.Skip(verifierSize)
	r.Opaque(opaqueLimit)
	r.Skip(4)
	switch h := r.Uint32(); h {
	case 0:
	case 1:
		r.stateProtectOps()
	case 2:
		r.stateProtectOps()
		r.opaques()
		r.opaques()
		r.Skip(8)
	default:
		r.bad("state_protect4_a", h)
	}
	r.implID()
	return r
}

// layoutCommitArgs skips LAYOUTCOMMIT4args:
//
//	struct LAYOUTCOMMIT4args { offset4; length4; bool reclaim; stateid4;
//	        newoffset4 loca_last_write_offset;  (bool; TRUE: offset4)
//	        newtime4 loca_time_modify;          (bool; TRUE: nfstime4)
//	        layoutupdate4 loca_layoutupdate; };
func layoutCommitArgs(r xr) xr {
	r.Skip(16 + 4 + stateidSize)
	if r.Bool() {
		r.Skip(8)
	}
	if r.Bool() {
		r.Skip(nfstimeSize)
	}
	r.typedBody()
	return r
}
