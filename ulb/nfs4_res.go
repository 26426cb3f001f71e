package ulb

// NFSv4 status codes that select a non-void error arm of a result union.
const (
	nfs4OK                = 0
	nfs4ErrTooSmall       = 10005
	nfs4ErrDenied         = 10010
	nfs4ErrClidInUse      = 10017
	nfs4ErrLayoutTryLater = 10058
	nfs4ErrOffloadNoReqs  = 10094
)

// resultsHead skips the results (nfs_resop4 arm) of operation op, whose
// number and nfsstat4 status have just been read: every NFSv4 result
// begins with its status. For the two operations with a DDP-eligible
// result (READ4resok data, READLINK4resok link) it stops right after the
// item's length word and returns its kind and length; both items end
// their result.
//
// Most results are void unless status is NFS4_OK; the exceptions are
// spelled out (LOCK/LOCKT denied, SETCLIENTID in use, GETDEVICEINFO too
// small, LAYOUTGET try later, COPY no requirements, and SETATTR, whose
// attrsset follows any status).
func resultsHead(r *xr, op, status uint32) (Kind, uint32) {
	if status != nfs4OK {
		resultsError(r, op, status)
		return KindNone, 0
	}
	switch op {
	case opDelegPurge, opDelegReturn, opLockT, opLookup, opLookupP,
		opNVerify, opOpenAttr, opPutFH, opPutPubFH, opPutRootFH,
		opRenew, opRestoreFH, opSaveFH, opSetClientIDConfirm, opVerify,
		opReleaseLockOwner, opIllegal, opBackchannelCtl,
		opDestroySession, opFreeStateID, opDestroyClientID,
		opReclaimComplete, opAllocate, opDeallocate, opLayoutError,
		opLayoutStats, opOffloadCancel, opClone:
		// status only

	case opClose, opLock, opLockU, opOpenConfirm, opOpenDowngrade: // stateid4
		r.Skip(stateidSize)

	case opAccess: // uint32_t supported; uint32_t access
		r.Skip(8)

	case opCommit: // verifier4 writeverf
		r.Skip(verifierSize)

	case opLink, opRemove, // change_info4 cinfo
		opSetXattr, opRemoveXattr:
		r.Skip(changeInfoSize)

	case opRename: // change_info4 source_cinfo; change_info4 target_cinfo
		r.Skip(2 * changeInfoSize)

	case opCreate: // change_info4 cinfo; bitmap4 attrset
		r.Skip(changeInfoSize)
		r.bitmap()

	case opGetattr: // fattr4 obj_attributes
		r.fattr()

	case opGetFH: // nfs_fh4 object
		r.fh()

	case opSetattr: // bitmap4 attrsset (after any status: see resultsError)
		r.bitmap()

	case opWrite: // count4 count; stable_how4 committed; verifier4 writeverf
		r.Skip(8 + verifierSize)

	case opRead: // bool eof; opaque data<>   <- DDP-eligible
		r.Skip(4)
		return KindReadData, r.Uint32()

	case opReadlink: // linktext4 link          <- DDP-eligible
		return KindReadlinkPath, r.Uint32()

	case opReaddir:
		readdirResults(r)

	case opOpen:
		// stateid4 stateid; change_info4 cinfo; uint32_t rflags;
		// bitmap4 attrset; open_delegation4 delegation
		r.Skip(stateidSize + changeInfoSize + 4)
		r.bitmap()
		r.openDelegation()

	case opSecinfo, opSecinfoNoName: // secinfo4 SECINFO4resok<>
		r.secinfos()

	case opSetClientID: // clientid4 clientid; verifier4 setclientid_confirm
		r.Skip(8 + verifierSize)

	case opBindConnToSession:
		// sessionid4; channel_dir_from_server4; bool use_conn_in_rdma_mode
		r.Skip(sessionIDSize + 8)

	case opExchangeID:
		exchangeIDResults(r)

	case opCreateSession:
		// sessionid4; sequenceid4; uint32_t flags; channel_attrs4 fore, back
		r.Skip(sessionIDSize + 8)
		r.channelAttrs()
		r.channelAttrs()

	case opGetDirDelegation:
		// union GET_DIR_DELEGATION4res_non_fatal switch (gddrnf4_status) {
		// case GDD4_OK: GET_DIR_DELEGATION4resok;
		//         (verifier4; stateid4; bitmap4 notification;
		//          bitmap4 child_attributes; bitmap4 dir_attributes)
		// case GDD4_UNAVAIL: bool will_signal_deleg_avail; };
		switch s := r.Uint32(); s {
		case 0:
			r.Skip(verifierSize + stateidSize)
			r.bitmap()
			r.bitmap()
			r.bitmap()
		case 1:
			r.Skip(4)
		default:
			r.bad("GET_DIR_DELEGATION4res_non_fatal", s)
		}

	case opGetDeviceInfo: // device_addr4 gdir_device_addr; bitmap4 notification
		r.typedBody()
		r.bitmap()

	case opGetDeviceList:
		// nfs_cookie4; verifier4; deviceid4 gdlr_deviceid_list<>; bool eof
		r.Skip(8 + verifierSize)
		n := r.ArrayLen(-1, deviceIDSize)
		r.Skip(n*deviceIDSize + 4)

	case opLayoutCommit: // newsize4 (bool ns_sizechanged; TRUE: length4)
		if r.Bool() {
			r.Skip(8)
		}

	case opLayoutGet:
		// bool return_on_close; stateid4; layout4 logr_layout<>:
		// struct layout4 { offset4; length4; layoutiomode4;
		//                  layout_content4 lo_content; };
		r.Skip(4 + stateidSize)
		n := r.ArrayLen(-1, 20+8)
		for i := 0; i < n && r.OK(); i++ {
			r.Skip(20)
			r.typedBody()
		}

	case opLayoutReturn: // layoutreturn_stateid (bool; TRUE: stateid4)
		if r.Bool() {
			r.Skip(stateidSize)
		}

	case opSequence:
		// sessionid4; sequenceid4; slotid4; slotid4 highest;
		// slotid4 target_highest; uint32_t status_flags
		r.Skip(sessionIDSize + 20)

	case opSetSSV: // opaque ssr_digest<>
		r.Opaque(-1)

	case opTestStateID: // nfsstat4 tsr_status_codes<>
		n := r.ArrayLen(-1, 4)
		r.Skip(4 * n)

	case opWantDelegation: // open_delegation4
		r.openDelegation()

	case opCopy: // write_response4 cr_response; copy_requirements4 (2 x bool)
		r.writeResponse()
		r.Skip(8)

	case opCopyNotify:
		// nfstime4 lease_time; stateid4; netloc4 cnr_source_server<>
		r.Skip(nfstimeSize + stateidSize)
		r.netlocs()

	case opOffloadStatus: // length4 osr_count; nfsstat4 osr_complete<1>
		r.Skip(8)
		n := r.ArrayLen(1, 4)
		r.Skip(4 * n)

	case opIOAdvise: // bitmap4 ior_hints
		r.bitmap()

	case opReadPlus:
		readPlusResults(r)

	case opSeek: // bool sr_eof; offset4 sr_offset
		r.Skip(12)

	case opWriteSame: // write_response4
		r.writeResponse()

	case opGetXattr: // xattrvalue4 gxr_value (opaque<>)
		r.Opaque(-1)

	case opListXattrs: // nfs_cookie4; xattrkey4 lxr_names<>; bool lxr_eof
		r.Skip(8)
		n := r.ArrayLen(-1, 4)
		for i := 0; i < n && r.OK(); i++ {
			r.utf8()
		}
		r.Skip(4)

	default:
		r.Fail(&unknownOp{op: op, offset: r.Offset() - 8})
	}
	return KindNone, 0
}

// resultsError skips the results of op that failed with status: void but
// for the unions that give an error its own arm.
func resultsError(r *xr, op, status uint32) {
	switch {
	case !knownOp(op):
		r.Fail(&unknownOp{op: op, offset: r.Offset() - 8})

	case op == opSetattr:
		// struct SETATTR4res { nfsstat4 status; bitmap4 attrsset; };
		r.bitmap()

	case (op == opLock || op == opLockT) && status == nfs4ErrDenied:
		// struct LOCK4denied { offset4; length4; nfs_lock_type4 locktype;
		//                      lock_owner4 owner; };
		r.Skip(20)
		r.stateOwner()

	case op == opSetClientID && status == nfs4ErrClidInUse:
		// clientaddr4 client_using (netaddr4)
		r.netaddr()

	case op == opGetDeviceInfo && status == nfs4ErrTooSmall:
		// count4 gdir_mincount
		r.Skip(4)

	case op == opLayoutGet && status == nfs4ErrLayoutTryLater:
		// bool logr_will_signal_layout_avail
		r.Skip(4)

	case op == opCopy && status == nfs4ErrOffloadNoReqs:
		// copy_requirements4 cr_requirements (2 x bool)
		r.Skip(8)
	}
}

// readdirResults skips READDIR4resok:
//
//	struct READDIR4resok { verifier4 cookieverf; dirlist4 reply; };
//	struct dirlist4 { entry4 *entries; bool eof; };
//	struct entry4 { nfs_cookie4 cookie; component4 name; fattr4 attrs;
//	                entry4 *nextentry; };
func readdirResults(r *xr) {
	r.Skip(verifierSize)
	for r.Bool() {
		r.Skip(8)
		r.utf8()
		r.fattr()
	}
	r.Skip(4)
}

// readPlusResults skips read_plus_res4. Nothing in it is DDP-eligible
// (draft-ietf-nfsv4-nfs-ulb-v2 §"The NFSv4.2 READ_PLUS operation"):
//
//	struct read_plus_res4 { bool rpr_eof; read_plus_content rpr_contents<>; };
//	union read_plus_content switch (data_content4 rpc_content) {
//	case NFS4_CONTENT_DATA: data4 rpc_data;       (offset4; opaque d_data<>)
//	case NFS4_CONTENT_HOLE: data_info4 rpc_hole;  (offset4; length4)
//	default:                void;
//	};
func readPlusResults(r *xr) {
	r.Skip(4)
	n := r.ArrayLen(-1, 4)
	for i := 0; i < n && r.OK(); i++ {
		switch r.Uint32() {
		case 0:
			r.Skip(8)
			r.Opaque(-1)
		case 1:
			r.Skip(16)
		}
	}
}

// exchangeIDResults skips EXCHANGE_ID4resok:
//
//	struct EXCHANGE_ID4resok { clientid4; sequenceid4; uint32_t flags;
//	        state_protect4_r eir_state_protect;
//	        server_owner4 eir_server_owner;  (uint64 minor; opaque major<1024>)
//	        opaque eir_server_scope<NFS4_OPAQUE_LIMIT>;
//	        nfs_impl_id4 eir_server_impl_id<1>; };
//	union state_protect4_r switch (state_protect_how4 spr_how) {
//	case SP4_NONE:      void;
//	case SP4_MACH_CRED: state_protect_ops4 spr_mach_ops;
//	case SP4_SSV:       ssv_prot_info4 spr_ssv_info;
//	        (state_protect_ops4; uint32 hash_alg, encr_alg, ssv_len, window;
//	         gsshandle4_t spi_handles<>)
//	};
func exchangeIDResults(r *xr) {
	r.Skip(16)
	switch h := r.Uint32(); h {
	case 0:
	case 1:
		r.stateProtectOps()
	case 2:
		r.stateProtectOps()
		r.Skip(16)
		r.opaques()
	default:
		r.bad("state_protect4_r", h)
	}
	r.Skip(8)
	r.Opaque(opaqueLimit)
	r.Opaque(opaqueLimit)
	r.implID()
}
