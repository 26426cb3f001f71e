package ulb

// Hand-built NFSv4 XDR for the tests: every operation's arguments and
// results, union arm by union arm, written field by field after the
// RFC 7530 / RFC 8881 / RFC 7862 / RFC 8276 XDR (independently of the
// walker's skipping code, which they check).

// nfs4Field writes part of an operation's arguments or results.
type nfs4Field = func(*xmsg)

func stateid4(m *xmsg)    { m.u32(7).fixed(filler(12)) } // stateid4
func verifier4(m *xmsg)   { m.fixed(filler(8)) }         // verifier4
func sessionid4(m *xmsg)  { m.fixed(filler(16)) }        // sessionid4
func deviceid4(m *xmsg)   { m.fixed(filler(16)) }        // deviceid4
func nfstime4(m *xmsg)    { m.u64(1700000000).u32(999) } // nfstime4
func bitmap4(m *xmsg)     { m.u32(2).u32(0x0010011a).u32(0x00b0a23a) }
func changeInfo4(m *xmsg) { m.boolean(true).u64(1).u64(2) }              // change_info4
func owner4(m *xmsg)      { m.u64(0x1122334455667788).str("owner-one") } // state_owner4
func fattr4(m *xmsg)      { bitmap4(m); m.opaque(filler(37)) }           // attrlist of 37: 3 pad bytes
func nfsace4(m *xmsg)     { m.u32(0).u32(0).u32(0x1f01ff).str("EVERYONE@") }
func netaddr4(m *xmsg)    { m.str("tcp6").str("fe80::1.8.1") }
func fh4(m *xmsg)         { m.opaque(filler(28)) }
func channelAttrs4(ird bool) nfs4Field {
	return func(m *xmsg) {
		m.u32(0).u32(1049620).u32(1049480).u32(3428).u32(8).u32(64)
		if ird {
			m.u32(1).u32(16)
		} else {
			m.u32(0)
		}
	}
}

// cbSecParms: AUTH_NONE, AUTH_SYS with two gids, RPCSEC_GSS.
func cbSecParms4(m *xmsg) {
	m.u32(3)
	m.u32(0)
	m.u32(1).u32(12345).str("client.example").u32(0).u32(0).u32(2).u32(4).u32(27)
	m.u32(6).u32(2).opaque(filler(5)).opaque(filler(9))
}

func implID4(present bool) nfs4Field {
	return func(m *xmsg) {
		if !present {
			m.u32(0)
			return
		}
		m.u32(1).str("kernel.org").str("Linux 6.1.0 #1 SMP x86_64").then(nfstime4)
	}
}

// netloc4 arms.
func netlocName4(m *xmsg)    { m.u32(1).str("server.example") }
func netlocURL4(m *xmsg)     { m.u32(2).str("nfs://server/export") }
func netlocNetaddr4(m *xmsg) { m.u32(3).then(netaddr4) }

func writeResponse4(callback bool) nfs4Field {
	return func(m *xmsg) {
		if callback {
			m.u32(1).then(stateid4)
		} else {
			m.u32(0)
		}
		m.u64(65536).u32(2).then(verifier4)
	}
}

func openDeleg4(t uint32, arm nfs4Field) nfs4Field {
	return func(m *xmsg) {
		m.u32(t)
		if arm != nil {
			arm(m)
		}
	}
}

// all4 builds a field from several.
func all4(fs ...nfs4Field) nfs4Field {
	return func(m *xmsg) {
		for _, f := range fs {
			if f != nil {
				f(m)
			}
		}
	}
}

func words4(vs ...uint32) nfs4Field {
	return func(m *xmsg) {
		for _, v := range vs {
			m.u32(v)
		}
	}
}

func hypers4(vs ...uint64) nfs4Field {
	return func(m *xmsg) {
		for _, v := range vs {
			m.u64(v)
		}
	}
}

func str4(s string) nfs4Field { return func(m *xmsg) { m.str(s) } }
func opaque4(n int) nfs4Field { return func(m *xmsg) { m.opaque(filler(n)) } }
func bool4(v bool) nfs4Field  { return func(m *xmsg) { m.boolean(v) } }
func openPrefix4(m *xmsg)     { m.u32(1).u32(2).u32(0).then(owner4) }
func openCreate4(how ...nfs4Field) nfs4Field {
	return all4(words4(1), all4(how...))
}

// nfs4ArgCase is one operation's arguments (after its number).
type nfs4ArgCase struct {
	name string
	op   uint32
	args nfs4Field
}

// nfs4ArgCases holds the arguments of every operation, one case per
// union arm.
var nfs4ArgCases = []nfs4ArgCase{
	{"ACCESS", opAccess, words4(0x3f)},
	{"CLOSE", opClose, all4(words4(3), stateid4)},
	{"COMMIT", opCommit, all4(hypers4(4096), words4(8192))},
	{"CREATE dir", opCreate, all4(words4(2), str4("newdir"), fattr4)},
	{"CREATE blk", opCreate, all4(words4(3, 8, 1), str4("sda1"), fattr4)},
	{"CREATE chr", opCreate, all4(words4(4, 1, 3), str4("null"), fattr4)},
	{"CREATE sock", opCreate, all4(words4(6), str4("sock"), fattr4)},
	{"CREATE fifo", opCreate, all4(words4(7), str4("fifo"), fattr4)},
	{"CREATE bad type", opCreate, all4(words4(99), str4("x"), fattr4)},
	{"DELEGPURGE", opDelegPurge, hypers4(42)},
	{"DELEGRETURN", opDelegReturn, stateid4},
	{"GETATTR", opGetattr, bitmap4},
	{"GETATTR 3 words", opGetattr, words4(3, 1, 2, 3)},
	{"GETFH", opGetFH, nil},
	{"LINK", opLink, str4("hardlink")},
	{"LOCK new owner", opLock, all4(words4(2), bool4(false), hypers4(0, 100), bool4(true), words4(1), stateid4, words4(0), owner4)},
	{"LOCK existing", opLock, all4(words4(1), bool4(true), hypers4(0, ^uint64(0)), bool4(false), stateid4, words4(5))},
	{"LOCKT", opLockT, all4(words4(2), hypers4(0, 10), owner4)},
	{"LOCKU", opLockU, all4(words4(2, 6), stateid4, hypers4(0, 10))},
	{"LOOKUP", opLookup, str4("a-name")},
	{"LOOKUPP", opLookupP, nil},
	{"NVERIFY", opNVerify, fattr4},
	{"OPEN nocreate CLAIM_NULL", opOpen, all4(openPrefix4, words4(0), words4(0), str4("file"))},
	{"OPEN UNCHECKED4", opOpen, all4(openPrefix4, openCreate4(words4(0), fattr4), words4(0), str4("file"))},
	{"OPEN GUARDED4", opOpen, all4(openPrefix4, openCreate4(words4(1), fattr4), words4(0), str4("file"))},
	{"OPEN EXCLUSIVE4", opOpen, all4(openPrefix4, openCreate4(words4(2), verifier4), words4(0), str4("file"))},
	{"OPEN EXCLUSIVE4_1", opOpen, all4(openPrefix4, openCreate4(words4(3), verifier4, fattr4), words4(0), str4("file"))},
	{"OPEN CLAIM_PREVIOUS", opOpen, all4(openPrefix4, words4(0), words4(1, 1))},
	{"OPEN CLAIM_DELEGATE_CUR", opOpen, all4(openPrefix4, words4(0), words4(2), stateid4, str4("file"))},
	{"OPEN CLAIM_DELEGATE_PREV", opOpen, all4(openPrefix4, words4(0), words4(3), str4("file"))},
	{"OPEN CLAIM_FH", opOpen, all4(openPrefix4, words4(0), words4(4))},
	{"OPEN CLAIM_DELEG_CUR_FH", opOpen, all4(openPrefix4, words4(0), words4(5), stateid4)},
	{"OPEN CLAIM_DELEG_PREV_FH", opOpen, all4(openPrefix4, words4(0), words4(6))},
	{"OPEN opentype 7 is void", opOpen, all4(openPrefix4, words4(7), words4(4))},
	{"OPENATTR", opOpenAttr, bool4(true)},
	{"OPEN_CONFIRM", opOpenConfirm, all4(stateid4, words4(2))},
	{"OPEN_DOWNGRADE", opOpenDowngrade, all4(stateid4, words4(3, 1, 0))},
	{"PUTFH", opPutFH, fh4},
	{"PUTFH 128", opPutFH, opaque4(128)},
	{"PUTPUBFH", opPutPubFH, nil},
	{"PUTROOTFH", opPutRootFH, nil},
	{"READ", opRead, all4(stateid4, hypers4(1<<20), words4(1<<20))},
	{"READDIR", opReaddir, all4(hypers4(0), verifier4, words4(8192, 32768), bitmap4)},
	{"READLINK", opReadlink, nil},
	{"REMOVE", opRemove, str4("victim")},
	{"RENAME", opRename, all4(str4("old"), str4("new-name"))},
	{"RENEW", opRenew, hypers4(9)},
	{"RESTOREFH", opRestoreFH, nil},
	{"SAVEFH", opSaveFH, nil},
	{"SECINFO", opSecinfo, str4("sub")},
	{"SETATTR", opSetattr, all4(stateid4, fattr4)},
	{"SETCLIENTID", opSetClientID, all4(verifier4, opaque4(41), words4(0x40000000), netaddr4, words4(1))},
	{"SETCLIENTID_CONFIRM", opSetClientIDConfirm, all4(hypers4(3), verifier4)},
	{"VERIFY", opVerify, fattr4},
	{"WRITE", opWrite, all4(stateid4, hypers4(0), words4(2), opaque4(13))},
	{"RELEASE_LOCKOWNER", opReleaseLockOwner, owner4},
	{"ILLEGAL", opIllegal, nil},

	{"BACKCHANNEL_CTL", opBackchannelCtl, all4(words4(0x40000000), cbSecParms4)},
	{"BIND_CONN_TO_SESSION", opBindConnToSession, all4(sessionid4, words4(3), bool4(false))},
	{"EXCHANGE_ID SP4_NONE", opExchangeID, all4(verifier4, opaque4(30), words4(0x103), words4(0), implID4(true))},
	{"EXCHANGE_ID SP4_MACH_CRED", opExchangeID, all4(verifier4, opaque4(30), words4(0x103), words4(1), bitmap4, bitmap4, implID4(false))},
	{"EXCHANGE_ID SP4_SSV", opExchangeID, all4(verifier4, opaque4(30), words4(0x103), words4(2), bitmap4, bitmap4,
		words4(2), opaque4(9), opaque4(11), words4(1), opaque4(9), words4(16, 2), implID4(true))},
	{"CREATE_SESSION", opCreateSession, all4(hypers4(5), words4(1, 3), channelAttrs4(false), channelAttrs4(true), words4(0x40000000), cbSecParms4)},
	{"DESTROY_SESSION", opDestroySession, sessionid4},
	{"FREE_STATEID", opFreeStateID, stateid4},
	{"GET_DIR_DELEGATION", opGetDirDelegation, all4(bool4(false), bitmap4, nfstime4, nfstime4, bitmap4, bitmap4)},
	{"GETDEVICEINFO", opGetDeviceInfo, all4(deviceid4, words4(1, 4096), bitmap4)},
	{"GETDEVICELIST", opGetDeviceList, all4(words4(1, 16), hypers4(0), verifier4)},
	{"LAYOUTCOMMIT new offset and time", opLayoutCommit, all4(hypers4(0, 4096), bool4(false), stateid4, bool4(true), hypers4(4095), bool4(true), nfstime4, words4(1), opaque4(6))},
	{"LAYOUTCOMMIT neither", opLayoutCommit, all4(hypers4(0, 4096), bool4(false), stateid4, bool4(false), bool4(false), words4(3), opaque4(0))},
	{"LAYOUTGET", opLayoutGet, all4(bool4(false), words4(1, 2), hypers4(0, ^uint64(0), 4096), stateid4, words4(4096))},
	{"LAYOUTRETURN FILE", opLayoutReturn, all4(bool4(false), words4(1, 3), words4(1), hypers4(0, ^uint64(0)), stateid4, opaque4(10))},
	{"LAYOUTRETURN FSID", opLayoutReturn, all4(bool4(false), words4(1, 3), words4(2))},
	{"LAYOUTRETURN ALL", opLayoutReturn, all4(bool4(true), words4(1, 3), words4(3))},
	{"SECINFO_NO_NAME", opSecinfoNoName, words4(1)},
	{"SEQUENCE", opSequence, all4(sessionid4, words4(17, 3, 63), bool4(true))},
	{"SET_SSV", opSetSSV, all4(opaque4(32), opaque4(20))},
	{"TEST_STATEID", opTestStateID, all4(words4(2), stateid4, stateid4)},
	{"WANT_DELEGATION CLAIM_FH", opWantDelegation, all4(words4(0x300), words4(4))},
	{"WANT_DELEGATION CLAIM_DELEG_PREV_FH", opWantDelegation, all4(words4(0x300), words4(6))},
	{"WANT_DELEGATION CLAIM_PREVIOUS", opWantDelegation, all4(words4(0x100), words4(1, 1))},
	{"DESTROY_CLIENTID", opDestroyClientID, hypers4(5)},
	{"RECLAIM_COMPLETE", opReclaimComplete, bool4(false)},

	{"ALLOCATE", opAllocate, all4(stateid4, hypers4(0, 1<<30))},
	{"COPY", opCopy, all4(stateid4, stateid4, hypers4(0, 4096, 1<<20), bool4(false), bool4(true), words4(3), netlocName4, netlocURL4, netlocNetaddr4)},
	{"COPY intra-server", opCopy, all4(stateid4, stateid4, hypers4(0, 0, 0), bool4(true), bool4(true), words4(0))},
	{"COPY_NOTIFY", opCopyNotify, all4(stateid4, netlocNetaddr4)},
	{"DEALLOCATE", opDeallocate, all4(stateid4, hypers4(4096, 8192))},
	{"IO_ADVISE", opIOAdvise, all4(stateid4, hypers4(0, 1<<20), bitmap4)},
	{"LAYOUTERROR", opLayoutError, all4(hypers4(0, 4096), stateid4, words4(2), deviceid4, words4(10006, 25), deviceid4, words4(5, 38))},
	{"LAYOUTSTATS", opLayoutStats, all4(hypers4(0, 4096), stateid4, hypers4(1, 2, 3, 4), deviceid4, words4(4), opaque4(21))},
	{"OFFLOAD_CANCEL", opOffloadCancel, stateid4},
	{"OFFLOAD_STATUS", opOffloadStatus, stateid4},
	{"READ_PLUS", opReadPlus, all4(stateid4, hypers4(0), words4(65536))},
	{"SEEK", opSeek, all4(stateid4, hypers4(100), words4(1))},
	{"WRITE_SAME", opWriteSame, all4(stateid4, words4(2), hypers4(0, 512, 8, 0), words4(0), hypers4(0), opaque4(7))},
	{"CLONE", opClone, all4(stateid4, stateid4, hypers4(0, 0, 1<<20))},

	{"GETXATTR", opGetXattr, str4("user.comment")},
	{"SETXATTR", opSetXattr, all4(words4(1), str4("user.comment"), opaque4(300))},
	{"LISTXATTRS", opListXattrs, all4(hypers4(0), words4(4096))},
	{"REMOVEXATTR", opRemoveXattr, str4("user.comment")},
}

// nfs4ResCase is one operation's results (after its number and status).
type nfs4ResCase struct {
	name   string
	op     uint32
	status uint32
	res    nfs4Field
}

// NFSv4 errors used by the result cases.
const (
	nfs4ErrIO       = 5
	nfs4ErrNoEnt    = 2
	nfs4ErrStale    = 70
	nfs4ErrOpIllegl = 10044
)

// nfs4ResCases holds the results of every operation, one case per union
// arm (error arms included).
var nfs4ResCases = []nfs4ResCase{
	{"ACCESS", opAccess, 0, words4(0x3f, 0x1f)},
	{"CLOSE", opClose, 0, stateid4},
	{"COMMIT", opCommit, 0, verifier4},
	{"CREATE", opCreate, 0, all4(changeInfo4, bitmap4)},
	{"DELEGPURGE", opDelegPurge, 0, nil},
	{"DELEGRETURN", opDelegReturn, 0, nil},
	{"GETATTR", opGetattr, 0, fattr4},
	{"GETATTR empty", opGetattr, 0, words4(0, 0)},
	{"GETFH", opGetFH, 0, fh4},
	{"LINK", opLink, 0, changeInfo4},
	{"LOCK", opLock, 0, stateid4},
	{"LOCK denied", opLock, nfs4ErrDenied, all4(hypers4(0, 100), words4(2), owner4)},
	{"LOCKT", opLockT, 0, nil},
	{"LOCKT denied", opLockT, nfs4ErrDenied, all4(hypers4(50, 10), words4(1), owner4)},
	{"LOCKU", opLockU, 0, stateid4},
	{"LOOKUP", opLookup, 0, nil},
	{"LOOKUP noent", opLookup, nfs4ErrNoEnt, nil},
	{"LOOKUPP", opLookupP, 0, nil},
	{"NVERIFY", opNVerify, 0, nil},
	{"OPEN deleg none", opOpen, 0, all4(stateid4, changeInfo4, words4(4), bitmap4, openDeleg4(0, nil))},
	{"OPEN deleg read", opOpen, 0, all4(stateid4, changeInfo4, words4(4), bitmap4, openDeleg4(1, all4(stateid4, bool4(false), nfsace4)))},
	{"OPEN deleg write size", opOpen, 0, all4(stateid4, changeInfo4, words4(4), bitmap4, openDeleg4(2, all4(stateid4, bool4(false), words4(1), hypers4(1<<40), nfsace4)))},
	{"OPEN deleg write blocks", opOpen, 0, all4(stateid4, changeInfo4, words4(4), bitmap4, openDeleg4(2, all4(stateid4, bool4(true), words4(2, 100, 4096), nfsace4)))},
	{"OPEN deleg none_ext contention", opOpen, 0, all4(stateid4, changeInfo4, words4(4), bitmap4, openDeleg4(3, all4(words4(1), bool4(true))))},
	{"OPEN deleg none_ext resource", opOpen, 0, all4(stateid4, changeInfo4, words4(4), bitmap4, openDeleg4(3, all4(words4(2), bool4(false))))},
	{"OPEN deleg none_ext not wanted", opOpen, 0, all4(stateid4, changeInfo4, words4(4), bitmap4, openDeleg4(3, words4(0)))},
	{"OPENATTR", opOpenAttr, 0, nil},
	{"OPEN_CONFIRM", opOpenConfirm, 0, stateid4},
	{"OPEN_DOWNGRADE", opOpenDowngrade, 0, stateid4},
	{"PUTFH", opPutFH, 0, nil},
	{"PUTFH stale", opPutFH, nfs4ErrStale, nil},
	{"PUTPUBFH", opPutPubFH, 0, nil},
	{"PUTROOTFH", opPutRootFH, 0, nil},
	{"READ", opRead, 0, all4(bool4(true), opaque4(21))},
	{"READ io error", opRead, nfs4ErrIO, nil},
	{"READDIR two entries", opReaddir, 0, all4(verifier4, bool4(true), hypers4(1), str4("a"), fattr4, bool4(true), hypers4(2), str4("bcde"), fattr4, bool4(false), bool4(true))},
	{"READDIR empty", opReaddir, 0, all4(verifier4, bool4(false), bool4(false))},
	{"READLINK", opReadlink, 0, str4("../target/x")},
	{"REMOVE", opRemove, 0, changeInfo4},
	{"RENAME", opRename, 0, all4(changeInfo4, changeInfo4)},
	{"RENEW", opRenew, 0, nil},
	{"RESTOREFH", opRestoreFH, 0, nil},
	{"SAVEFH", opSaveFH, 0, nil},
	{"SECINFO", opSecinfo, 0, all4(words4(3, 6), opaque4(11), words4(0, 1), words4(1), words4(6), opaque4(11), words4(0, 3))},
	{"SETATTR", opSetattr, 0, bitmap4},
	{"SETATTR error keeps attrsset", opSetattr, nfs4ErrIO, words4(0)},
	{"SETCLIENTID", opSetClientID, 0, all4(hypers4(77), verifier4)},
	{"SETCLIENTID in use", opSetClientID, nfs4ErrClidInUse, netaddr4},
	{"SETCLIENTID_CONFIRM", opSetClientIDConfirm, 0, nil},
	{"VERIFY", opVerify, 0, nil},
	{"WRITE", opWrite, 0, all4(words4(4096, 2), verifier4)},
	{"RELEASE_LOCKOWNER", opReleaseLockOwner, 0, nil},
	{"ILLEGAL", opIllegal, nfs4ErrOpIllegl, nil},

	{"BACKCHANNEL_CTL", opBackchannelCtl, 0, nil},
	{"BIND_CONN_TO_SESSION", opBindConnToSession, 0, all4(sessionid4, words4(3), bool4(false))},
	{"EXCHANGE_ID SP4_NONE", opExchangeID, 0, all4(hypers4(1), words4(1, 0x20103), words4(0), hypers4(0), opaque4(19), opaque4(19), implID4(true))},
	{"EXCHANGE_ID SP4_MACH_CRED", opExchangeID, 0, all4(hypers4(1), words4(1, 0x20103), words4(1), bitmap4, bitmap4, hypers4(0), opaque4(19), opaque4(5), implID4(false))},
	{"EXCHANGE_ID SP4_SSV", opExchangeID, 0, all4(hypers4(1), words4(1, 0x20103), words4(2), bitmap4, bitmap4, words4(1, 2, 32, 16), words4(2), opaque4(9), opaque4(10), hypers4(0), opaque4(19), opaque4(19), implID4(true))},
	{"CREATE_SESSION", opCreateSession, 0, all4(sessionid4, words4(1, 2), channelAttrs4(false), channelAttrs4(true))},
	{"DESTROY_SESSION", opDestroySession, 0, nil},
	{"FREE_STATEID", opFreeStateID, 0, nil},
	{"GET_DIR_DELEGATION ok", opGetDirDelegation, 0, all4(words4(0), verifier4, stateid4, bitmap4, bitmap4, bitmap4)},
	{"GET_DIR_DELEGATION unavail", opGetDirDelegation, 0, all4(words4(1), bool4(true))},
	{"GETDEVICEINFO", opGetDeviceInfo, 0, all4(words4(1), opaque4(45), bitmap4)},
	{"GETDEVICEINFO too small", opGetDeviceInfo, nfs4ErrTooSmall, words4(8192)},
	{"GETDEVICELIST", opGetDeviceList, 0, all4(hypers4(2), verifier4, words4(2), deviceid4, deviceid4, bool4(true))},
	{"LAYOUTCOMMIT new size", opLayoutCommit, 0, all4(bool4(true), hypers4(8192))},
	{"LAYOUTCOMMIT same size", opLayoutCommit, 0, bool4(false)},
	{"LAYOUTGET", opLayoutGet, 0, all4(bool4(false), stateid4, words4(2), hypers4(0, 4096), words4(1), words4(1), opaque4(33), hypers4(4096, 4096), words4(2), words4(1), opaque4(4))},
	{"LAYOUTGET try later", opLayoutGet, nfs4ErrLayoutTryLater, bool4(true)},
	{"LAYOUTRETURN stateid", opLayoutReturn, 0, all4(bool4(true), stateid4)},
	{"LAYOUTRETURN none", opLayoutReturn, 0, bool4(false)},
	{"SECINFO_NO_NAME", opSecinfoNoName, 0, all4(words4(2, 1, 0))},
	{"SEQUENCE", opSequence, 0, all4(sessionid4, words4(17, 3, 63, 63, 0))},
	{"SET_SSV", opSetSSV, 0, opaque4(20)},
	{"TEST_STATEID", opTestStateID, 0, words4(2, 0, 10025)},
	{"WANT_DELEGATION", opWantDelegation, 0, openDeleg4(1, all4(stateid4, bool4(false), nfsace4))},
	{"DESTROY_CLIENTID", opDestroyClientID, 0, nil},
	{"RECLAIM_COMPLETE", opReclaimComplete, 0, nil},

	{"ALLOCATE", opAllocate, 0, nil},
	{"COPY", opCopy, 0, all4(writeResponse4(true), bool4(true), bool4(false))},
	{"COPY sync", opCopy, 0, all4(writeResponse4(false), bool4(true), bool4(true))},
	{"COPY no reqs", opCopy, nfs4ErrOffloadNoReqs, all4(bool4(false), bool4(true))},
	{"COPY_NOTIFY", opCopyNotify, 0, all4(nfstime4, stateid4, words4(2), netlocURL4, netlocNetaddr4)},
	{"DEALLOCATE", opDeallocate, 0, nil},
	{"IO_ADVISE", opIOAdvise, 0, bitmap4},
	{"LAYOUTERROR", opLayoutError, 0, nil},
	{"LAYOUTSTATS", opLayoutStats, 0, nil},
	{"OFFLOAD_CANCEL", opOffloadCancel, 0, nil},
	{"OFFLOAD_STATUS done", opOffloadStatus, 0, all4(hypers4(1<<20), words4(1, 0))},
	{"OFFLOAD_STATUS running", opOffloadStatus, 0, all4(hypers4(4096), words4(0))},
	{"READ_PLUS", opReadPlus, 0, all4(bool4(false), words4(3), words4(0), hypers4(0), opaque4(9), words4(1), hypers4(9, 4087), words4(0), hypers4(4096), opaque4(3))},
	{"SEEK", opSeek, 0, all4(bool4(false), hypers4(8192))},
	{"WRITE_SAME", opWriteSame, 0, writeResponse4(true)},
	{"CLONE", opClone, 0, nil},

	{"GETXATTR", opGetXattr, 0, opaque4(77)},
	{"SETXATTR", opSetXattr, 0, changeInfo4},
	{"LISTXATTRS", opListXattrs, 0, all4(hypers4(3), words4(2), str4("user.a"), str4("user.bcdef"), bool4(true))},
	{"REMOVEXATTR", opRemoveXattr, 0, changeInfo4},
}

// Whole COMPOUNDs.

// nfs4Compound writes a COMPOUND4args header and its operations.
func nfs4Compound(tag string, minor uint32, ops ...nfs4Field) *xmsg {
	m := newXmsg().str(tag).u32(minor).u32(uint32(len(ops)))
	for _, op := range ops {
		op(m)
	}
	return m
}

// nfs4CompoundRes writes a COMPOUND4res header and its results.
func nfs4CompoundRes(status uint32, tag string, ops ...nfs4Field) *xmsg {
	m := newXmsg().u32(status).str(tag).u32(uint32(len(ops)))
	for _, op := range ops {
		op(m)
	}
	return m
}

// argOp is an nfs_argop4; resOp an nfs_resop4.
func argOp(op uint32, args nfs4Field) nfs4Field { return all4(words4(op), args) }
func resOp(op, status uint32, res nfs4Field) nfs4Field {
	return all4(words4(op, status), res)
}

// Operations the item tests use.
func putfhArgs4(m *xmsg) { argOp(opPutFH, fh4)(m) }
func sequenceArgs4(m *xmsg) {
	argOp(opSequence, all4(sessionid4, words4(17, 3, 63), bool4(false)))(m)
}
func writeArgs4(data []byte) nfs4Field {
	return argOp(opWrite, all4(stateid4, hypers4(0), words4(2), func(m *xmsg) { m.opaque(data) }))
}
func readArgs4(count uint32) nfs4Field {
	return argOp(opRead, all4(stateid4, hypers4(0), words4(count)))
}
func symlinkArgs4(name, target string) nfs4Field {
	return argOp(opCreate, all4(words4(nf4lnk), str4(target), str4(name), fattr4))
}
func getattrArgs4(m *xmsg) { argOp(opGetattr, bitmap4)(m) }
func sequenceRes4(m *xmsg) {
	resOp(opSequence, 0, all4(sessionid4, words4(17, 3, 63, 63, 0)))(m)
}
func putfhRes4(m *xmsg) { resOp(opPutFH, 0, nil)(m) }
func readRes4(eof bool, data []byte) nfs4Field {
	return resOp(opRead, 0, all4(bool4(eof), func(m *xmsg) { m.opaque(data) }))
}
func readlinkRes4(path string) nfs4Field { return resOp(opReadlink, 0, str4(path)) }
func getattrRes4(m *xmsg)                { resOp(opGetattr, 0, fattr4)(m) }
