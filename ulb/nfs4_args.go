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
// for CREATE, calls argsTail.
//
// Unions are parsed as the superset of all minor versions: arms added in
// 4.1 (CLAIM_FH, EXCLUSIVE4_1, ...) have discriminants that 4.0 leaves
// unused, so no layout depends on the COMPOUND's minorversion.
func argsHead(r *xr, op uint32) (Kind, uint32) {
	switch op {
	case opGetFH, opLookupP, opPutPubFH, opPutRootFH, opReadlink,
		opRestoreFH, opSaveFH, opIllegal:
		// void

	case opAccess, // uint32_t access
		opOpenAttr,        // bool createdir
		opSecinfoNoName,   // secinfo_style4
		opReclaimComplete: // bool rca_one_fs
		r.Skip(4)

	case opDelegPurge, opRenew, opDestroyClientID: // clientid4
		r.Skip(8)

	case opCommit: // offset4 offset; count4 count
		r.Skip(12)

	case opDelegReturn, opFreeStateID, opOffloadCancel, opOffloadStatus: // stateid4
		r.Skip(stateidSize)

	case opDestroySession: // sessionid4
		r.Skip(sessionIDSize)

	case opClose: // seqid4 seqid; stateid4 open_stateid
		r.Skip(4 + stateidSize)

	case opOpenConfirm: // stateid4 open_stateid; seqid4 seqid
		r.Skip(stateidSize + 4)

	case opOpenDowngrade: // stateid4; seqid4; share_access; share_deny
		r.Skip(stateidSize + 12)

	case opSetClientIDConfirm: // clientid4; verifier4
		r.Skip(8 + verifierSize)

	case opRead, // stateid4 stateid; offset4 offset; count4 count
		opReadPlus: // same layout
		r.Skip(stateidSize + 12)

	case opLockU: // locktype; seqid4; stateid4; offset4; length4
		r.Skip(8 + stateidSize + 16)

	case opAllocate, opDeallocate: // stateid4; offset4; length4
		r.Skip(stateidSize + 16)

	case opSeek: // stateid4 sa_stateid; offset4 sa_offset; data_content4 sa_what
		r.Skip(stateidSize + 12)

	case opClone: // stateid4 src, dst; offset4 src, dst; length4 count
		r.Skip(2*stateidSize + 24)

	case opSequence:
		// sessionid4; sequenceid4; slotid4; slotid4 highest; bool cachethis
		r.Skip(sessionIDSize + 16)

	case opBindConnToSession:
		// sessionid4; channel_dir_from_client4; bool use_conn_in_rdma_mode
		r.Skip(sessionIDSize + 8)

	case opGetDeviceList:
		// layouttype4; count4 maxdevices; nfs_cookie4; verifier4
		r.Skip(8 + 8 + verifierSize)

	case opListXattrs: // nfs_cookie4 lxa_cookie; count4 lxa_maxcount
		r.Skip(12)

	case opLookup, opLink, opRemove, opSecinfo, // component4
		opGetXattr, opRemoveXattr: // xattrkey4
		r.utf8()

	case opRename: // component4 oldname; component4 newname
		r.utf8()
		r.utf8()

	case opPutFH: // nfs_fh4 object
		r.fh()

	case opGetattr: // bitmap4 attr_request
		r.bitmap()

	case opVerify, opNVerify: // fattr4 obj_attributes
		r.fattr()

	case opSetattr: // stateid4 stateid; fattr4 obj_attributes
		r.Skip(stateidSize)
		r.fattr()

	case opReaddir:
		// nfs_cookie4; verifier4; count4 dircount; count4 maxcount; bitmap4
		r.Skip(8 + verifierSize + 8)
		r.bitmap()

	case opReleaseLockOwner: // lock_owner4
		r.stateOwner()

	case opWrite:
		// stateid4 stateid; offset4 offset; stable_how4 stable; opaque data<>
		r.Skip(stateidSize + 12)
		return KindWriteData, r.Uint32()

	case opCreate:
		return createHead(r)

	case opLock:
		lockArgs(r)

	case opLockT:
		// nfs_lock_type4 locktype; offset4; length4; lock_owner4 owner
		r.Skip(4 + 16)
		r.stateOwner()

	case opOpen:
		openArgs(r)

	case opSetClientID:
		// nfs_client_id4 client (verifier4, opaque id<1024>);
		// cb_client4 callback (uint32 cb_program, netaddr4 cb_location);
		// uint32_t callback_ident
		r.Skip(verifierSize)
		r.Opaque(opaqueLimit)
		r.Skip(4)
		r.netaddr()
		r.Skip(4)

	case opBackchannelCtl:
		// uint32_t bca_cb_program; callback_sec_parms4 bca_sec_parms<>
		r.Skip(4)
		r.cbSecParms()

	case opExchangeID:
		exchangeIDArgs(r)

	case opCreateSession:
		// clientid4; sequenceid4; uint32_t flags; channel_attrs4 fore, back;
		// uint32_t cb_program; callback_sec_parms4 csa_sec_parms<>
		r.Skip(8 + 4 + 4)
		r.channelAttrs()
		r.channelAttrs()
		r.Skip(4)
		r.cbSecParms()

	case opGetDirDelegation:
		// bool signal_deleg_avail; bitmap4 notification_types;
		// attr_notice4 child_attr_delay, dir_attr_delay (nfstime4);
		// bitmap4 child_attributes; bitmap4 dir_attributes
		r.Skip(4)
		r.bitmap()
		r.Skip(2 * nfstimeSize)
		r.bitmap()
		r.bitmap()

	case opGetDeviceInfo:
		// deviceid4; layouttype4; count4 maxcount; bitmap4 notify_types
		r.Skip(deviceIDSize + 8)
		r.bitmap()

	case opLayoutCommit:
		layoutCommitArgs(r)

	case opLayoutGet:
		// bool signal_layout_avail; layouttype4; layoutiomode4; offset4;
		// length4 length; length4 minlength; stateid4; count4 maxcount
		r.Skip(12 + 24 + stateidSize + 4)

	case opLayoutReturn:
		// bool reclaim; layouttype4; layoutiomode4; layoutreturn4:
		// union layoutreturn4 switch (layoutreturn_type4 lr_returntype) {
		// case LAYOUTRETURN4_FILE: layoutreturn_file4 lr_layout;
		//         (offset4, length4, stateid4, opaque lrf_body<>)
		// default: void; };
		r.Skip(12)
		if r.Uint32() == 1 {
			r.Skip(16 + stateidSize)
			r.Opaque(-1)
		}

	case opSetSSV: // opaque ssa_ssv<>; opaque ssa_digest<>
		r.Opaque(-1)
		r.Opaque(-1)

	case opTestStateID: // stateid4 ts_stateids<>
		n := r.ArrayLen(-1, stateidSize)
		r.Skip(n * stateidSize)

	case opWantDelegation:
		// uint32_t wda_want; deleg_claim4 wda_claim:
		// union deleg_claim4 switch (open_claim_type4 dc_claim) {
		// case CLAIM_FH: void; case CLAIM_DELEG_PREV_FH: void;
		// case CLAIM_PREVIOUS: open_delegation_type4 dc_delegate_type; };
		r.Skip(4)
		switch c := r.Uint32(); c {
		case 4, 6:
		case 1:
			r.Skip(4)
		default:
			r.bad("deleg_claim4", c)
		}

	case opCopy:
		// stateid4 src, dst; offset4 src, dst; length4 count;
		// bool consecutive; bool synchronous; netloc4 ca_source_server<>
		r.Skip(2*stateidSize + 24 + 8)
		r.netlocs()

	case opCopyNotify: // stateid4 cna_src_stateid; netloc4 cna_destination_server
		r.Skip(stateidSize)
		r.netloc()

	case opIOAdvise: // stateid4; offset4; length4 count; bitmap4 hints
		r.Skip(stateidSize + 16)
		r.bitmap()

	case opLayoutError:
		// offset4; length4; stateid4; device_error4 lea_errors<>
		// struct device_error4 { deviceid4; nfsstat4; nfs_opnum4; };
		r.Skip(16 + stateidSize)
		n := r.ArrayLen(-1, deviceIDSize+8)
		r.Skip(n * (deviceIDSize + 8))

	case opLayoutStats:
		// offset4; length4; stateid4; io_info4 read, write (2 x uint64 each);
		// deviceid4; layoutupdate4
		r.Skip(16 + stateidSize + 32 + deviceIDSize)
		r.typedBody()

	case opWriteSame:
		// stateid4; stable_how4; app_data_block4 wsa_adb:
		// (offset4, length4 block_size, length4 block_count,
		//  length4 reloff_blocknum, count4 block_num, length4 reloff_pattern,
		//  opaque adb_pattern<>)
		r.Skip(stateidSize + 4 + 8 + 8 + 8 + 8 + 4 + 8)
		r.Opaque(-1)

	case opSetXattr:
		// setxattr_option4 sxa_option; xattrkey4 sxa_key; xattrvalue4 sxa_value
		r.Skip(4)
		r.utf8()
		r.Opaque(-1)

	default:
		r.Fail(&unknownOp{op: op, offset: r.Offset() - 4})
	}
	return KindNone, 0
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
func lockArgs(r *xr) {
	r.Skip(8 + 16)
	if r.Bool() {
		r.Skip(4 + stateidSize + 4)
		r.stateOwner()
	} else {
		r.Skip(stateidSize + 4)
	}
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
func openArgs(r *xr) {
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
func exchangeIDArgs(r *xr) {
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
}

// layoutCommitArgs skips LAYOUTCOMMIT4args:
//
//	struct LAYOUTCOMMIT4args { offset4; length4; bool reclaim; stateid4;
//	        newoffset4 loca_last_write_offset;  (bool; TRUE: offset4)
//	        newtime4 loca_time_modify;          (bool; TRUE: nfstime4)
//	        layoutupdate4 loca_layoutupdate; };
func layoutCommitArgs(r *xr) {
	r.Skip(16 + 4 + stateidSize)
	if r.Bool() {
		r.Skip(8)
	}
	if r.Bool() {
		r.Skip(nfstimeSize)
	}
	r.typedBody()
}
