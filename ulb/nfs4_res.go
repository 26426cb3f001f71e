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
// their result. Every other successful result is skipped as nfs4Results
// says.
//
// Most results are void unless status is NFS4_OK; the exceptions are
// spelled out in resultsError.
func resultsHead(r *xr, op, status uint32) (Kind, uint32) {
	switch {
	case status != nfs4OK:
		resultsError(r, op, status)
	case op == opRead: // bool eof; opaque data<>   <- DDP-eligible
		r.Skip(4)
		return KindReadData, r.Uint32()
	case op == opReadlink: // linktext4 link          <- DDP-eligible
		return KindReadlinkPath, r.Uint32()
	case !nfs4Results.skip(r, op):
		r.Fail(&unknownOp{op: op, offset: r.Offset() - 8})
	}
	return KindNone, 0
}

// nfs4Results is the layout of every NFSv4 operation's NFS4_OK results
// but READ and READLINK (resultsHead), after the status. Operations not
// listed have the status only: DELEGPURGE, DELEGRETURN, LOCKT, LOOKUP,
// LOOKUPP, NVERIFY, OPENATTR, PUTFH, PUTPUBFH, PUTROOTFH, RENEW,
// RESTOREFH, SAVEFH, SETCLIENTID_CONFIRM, VERIFY, RELEASE_LOCKOWNER,
// BACKCHANNEL_CTL, DESTROY_SESSION, FREE_STATEID, DESTROY_CLIENTID,
// RECLAIM_COMPLETE, ALLOCATE, DEALLOCATE, LAYOUTERROR, LAYOUTSTATS,
// OFFLOAD_CANCEL, CLONE.
var nfs4Results = opTable{
	opClose:         {fixed: stateidSize}, // stateid4
	opLock:          {fixed: stateidSize}, // stateid4
	opLockU:         {fixed: stateidSize}, // stateid4
	opOpenConfirm:   {fixed: stateidSize}, // stateid4
	opOpenDowngrade: {fixed: stateidSize}, // stateid4

	opAccess:      {fixed: 8},                  // uint32_t supported; uint32_t access
	opCommit:      {fixed: verifierSize},       // verifier4 writeverf
	opLink:        {fixed: changeInfoSize},     // change_info4 cinfo
	opRemove:      {fixed: changeInfoSize},     // change_info4 cinfo
	opSetXattr:    {fixed: changeInfoSize},     // change_info4 cinfo
	opRemoveXattr: {fixed: changeInfoSize},     // change_info4 cinfo
	opRename:      {fixed: 2 * changeInfoSize}, // change_info4 source_cinfo, target_cinfo
	// count4 count; stable_how4 committed; verifier4 writeverf
	opWrite: {fixed: 8 + verifierSize},
	// clientid4 clientid; verifier4 setclientid_confirm
	opSetClientID: {fixed: 8 + verifierSize},
	// sessionid4; channel_dir_from_server4; bool use_conn_in_rdma_mode
	opBindConnToSession: {fixed: sessionIDSize + 8},
	// sessionid4; sequenceid4; slotid4; slotid4 highest;
	// slotid4 target_highest; uint32_t status_flags
	opSequence: {fixed: sessionIDSize + 20},
	opSeek:     {fixed: 12}, // bool sr_eof; offset4 sr_offset

	// change_info4 cinfo; bitmap4 attrset
	opCreate:  {fixed: changeInfoSize, rest: bitmapStep},
	opGetattr: {rest: fattrStep},  // fattr4 obj_attributes
	opGetFH:   {rest: fhStep},     // nfs_fh4 object
	opSetattr: {rest: bitmapStep}, // bitmap4 attrsset (after any status: see resultsError)
	opReaddir: {rest: readdirResults},
	// stateid4 stateid; change_info4 cinfo; uint32_t rflags;
	// bitmap4 attrset; open_delegation4 delegation
	opOpen:          {fixed: stateidSize + changeInfoSize + 4, rest: bitmapStep, then: openDelegationStep},
	opSecinfo:       {rest: secinfosStep}, // secinfo4 SECINFO4resok<>
	opSecinfoNoName: {rest: secinfosStep},
	opExchangeID:    {rest: exchangeIDResults},
	// sessionid4; sequenceid4; uint32_t flags; channel_attrs4 fore, back
	opCreateSession:    {fixed: sessionIDSize + 8, rest: channelAttrsStep, then: channelAttrsStep},
	opGetDirDelegation: {rest: getDirDelegationResults},
	// device_addr4 gdir_device_addr; bitmap4 notification
	opGetDeviceInfo: {rest: typedBodyStep, then: bitmapStep},
	// nfs_cookie4; verifier4; then deviceIDList
	opGetDeviceList: {fixed: 8 + verifierSize, rest: deviceIDList},
	opLayoutCommit:  {rest: layoutCommitResults},
	// bool return_on_close; stateid4; then layouts
	opLayoutGet:      {fixed: 4 + stateidSize, rest: layouts},
	opLayoutReturn:   {rest: layoutReturnResults},
	opSetSSV:         {rest: anyOpaqueStep}, // opaque ssr_digest<>
	opTestStateID:    {rest: statusList},
	opWantDelegation: {rest: openDelegationStep}, // open_delegation4
	opCopy:           {rest: copyResults},
	// nfstime4 lease_time; stateid4; netloc4 cnr_source_server<>
	opCopyNotify: {fixed: nfstimeSize + stateidSize, rest: netlocsStep},
	// length4 osr_count; nfsstat4 osr_complete<1>
	opOffloadStatus: {fixed: 8, rest: offloadComplete},
	opIOAdvise:      {rest: bitmapStep}, // bitmap4 ior_hints
	opReadPlus:      {rest: readPlusResults},
	opWriteSame:     {rest: writeResponseStep}, // write_response4
	opGetXattr:      {rest: anyOpaqueStep},     // xattrvalue4 gxr_value (opaque<>)
	// nfs_cookie4; then xattrNames
	opListXattrs: {fixed: 8, rest: xattrNames},
}

// getDirDelegationResults skips GET_DIR_DELEGATION4res_non_fatal:
//
//	union GET_DIR_DELEGATION4res_non_fatal switch (gddrnf4_status) {
//	case GDD4_OK: GET_DIR_DELEGATION4resok;
//	        (verifier4; stateid4; bitmap4 notification;
//	         bitmap4 child_attributes; bitmap4 dir_attributes)
//	case GDD4_UNAVAIL: bool will_signal_deleg_avail; };
func getDirDelegationResults(r xr) xr {
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
	return r
}

// deviceIDList skips GETDEVICELIST4resok's deviceid4 gdlr_deviceid_list<>
// and the bool eof after it.
func deviceIDList(r xr) xr {
	n := r.ArrayLen(-1, deviceIDSize)
	r.Skip(n*deviceIDSize + 4)
	return r
}

// layoutCommitResults: newsize4 (bool ns_sizechanged; TRUE: length4).
func layoutCommitResults(r xr) xr {
	if r.Bool() {
		r.Skip(8)
	}
	return r
}

// layouts skips LAYOUTGET4resok's layout4 logr_layout<>:
//
//	struct layout4 { offset4; length4; layoutiomode4;
//	                 layout_content4 lo_content; };
func layouts(r xr) xr {
	n := r.ArrayLen(-1, 20+8)
	for i := 0; i < n && r.OK(); i++ {
		r.Skip(20)
		r.typedBody()
	}
	return r
}

// layoutReturnResults: layoutreturn_stateid (bool; TRUE: stateid4).
func layoutReturnResults(r xr) xr {
	if r.Bool() {
		r.Skip(stateidSize)
	}
	return r
}

// statusList: TEST_STATEID4resok's nfsstat4 tsr_status_codes<>.
func statusList(r xr) xr {
	n := r.ArrayLen(-1, 4)
	r.Skip(4 * n)
	return r
}

// copyResults: write_response4 cr_response; copy_requirements4 (2 x bool).
func copyResults(r xr) xr {
	r.writeResponse()
	r.Skip(8)
	return r
}

// offloadComplete: OFFLOAD_STATUS4resok's nfsstat4 osr_complete<1>.
func offloadComplete(r xr) xr {
	n := r.ArrayLen(1, 4)
	r.Skip(4 * n)
	return r
}

// xattrNames skips LISTXATTRS4resok after its cookie: xattrkey4
// lxr_names<>; bool lxr_eof.
func xattrNames(r xr) xr {
	n := r.ArrayLen(-1, 4)
	for i := 0; i < n && r.OK(); i++ {
		r.utf8()
	}
	r.Skip(4)
	return r
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
func readdirResults(r xr) xr {
	r.Skip(verifierSize)
	for r.Bool() {
		r.Skip(8)
		r.utf8()
		r.fattr()
	}
	r.Skip(4)
	return r
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
func readPlusResults(r xr) xr {
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
	return r
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
func exchangeIDResults(r xr) xr {
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
	return r
}
