package ulb

// NFSv4 operation numbers (enum nfs_opnum4): RFC 7530 (4.0), RFC 8881
// (4.1), RFC 7862 (4.2) and RFC 8276 (extended attributes).
const (
	opAccess             = 3
	opClose              = 4
	opCommit             = 5
	opCreate             = 6
	opDelegPurge         = 7
	opDelegReturn        = 8
	opGetattr            = 9
	opGetFH              = 10
	opLink               = 11
	opLock               = 12
	opLockT              = 13
	opLockU              = 14
	opLookup             = 15
	opLookupP            = 16
	opNVerify            = 17
	opOpen               = 18
	opOpenAttr           = 19
	opOpenConfirm        = 20
	opOpenDowngrade      = 21
	opPutFH              = 22
	opPutPubFH           = 23
	opPutRootFH          = 24
	opRead               = 25
	opReaddir            = 26
	opReadlink           = 27
	opRemove             = 28
	opRename             = 29
	opRenew              = 30
	opRestoreFH          = 31
	opSaveFH             = 32
	opSecinfo            = 33
	opSetattr            = 34
	opSetClientID        = 35
	opSetClientIDConfirm = 36
	opVerify             = 37
	opWrite              = 38
	opReleaseLockOwner   = 39

	// NFSv4.1
	opBackchannelCtl    = 40
	opBindConnToSession = 41
	opExchangeID        = 42
	opCreateSession     = 43
	opDestroySession    = 44
	opFreeStateID       = 45
	opGetDirDelegation  = 46
	opGetDeviceInfo     = 47
	opGetDeviceList     = 48
	opLayoutCommit      = 49
	opLayoutGet         = 50
	opLayoutReturn      = 51
	opSecinfoNoName     = 52
	opSequence          = 53
	opSetSSV            = 54
	opTestStateID       = 55
	opWantDelegation    = 56
	opDestroyClientID   = 57
	opReclaimComplete   = 58

	// NFSv4.2
	opAllocate      = 59
	opCopy          = 60
	opCopyNotify    = 61
	opDeallocate    = 62
	opIOAdvise      = 63
	opLayoutError   = 64
	opLayoutStats   = 65
	opOffloadCancel = 66
	opOffloadStatus = 67
	opReadPlus      = 68
	opSeek          = 69
	opWriteSame     = 70
	opClone         = 71

	// RFC 8276 extended attributes (NFSv4.2 extension)
	opGetXattr    = 72
	opSetXattr    = 73
	opListXattrs  = 74
	opRemoveXattr = 75

	opIllegal = 10044
)

// opNames is indexed by operation number.
var opNames = [...]string{
	opAccess:             "ACCESS",
	opClose:              "CLOSE",
	opCommit:             "COMMIT",
	opCreate:             "CREATE",
	opDelegPurge:         "DELEGPURGE",
	opDelegReturn:        "DELEGRETURN",
	opGetattr:            "GETATTR",
	opGetFH:              "GETFH",
	opLink:               "LINK",
	opLock:               "LOCK",
	opLockT:              "LOCKT",
	opLockU:              "LOCKU",
	opLookup:             "LOOKUP",
	opLookupP:            "LOOKUPP",
	opNVerify:            "NVERIFY",
	opOpen:               "OPEN",
	opOpenAttr:           "OPENATTR",
	opOpenConfirm:        "OPEN_CONFIRM",
	opOpenDowngrade:      "OPEN_DOWNGRADE",
	opPutFH:              "PUTFH",
	opPutPubFH:           "PUTPUBFH",
	opPutRootFH:          "PUTROOTFH",
	opRead:               "READ",
	opReaddir:            "READDIR",
	opReadlink:           "READLINK",
	opRemove:             "REMOVE",
	opRename:             "RENAME",
	opRenew:              "RENEW",
	opRestoreFH:          "RESTOREFH",
	opSaveFH:             "SAVEFH",
	opSecinfo:            "SECINFO",
	opSetattr:            "SETATTR",
	opSetClientID:        "SETCLIENTID",
	opSetClientIDConfirm: "SETCLIENTID_CONFIRM",
	opVerify:             "VERIFY",
	opWrite:              "WRITE",
	opReleaseLockOwner:   "RELEASE_LOCKOWNER",
	opBackchannelCtl:     "BACKCHANNEL_CTL",
	opBindConnToSession:  "BIND_CONN_TO_SESSION",
	opExchangeID:         "EXCHANGE_ID",
	opCreateSession:      "CREATE_SESSION",
	opDestroySession:     "DESTROY_SESSION",
	opFreeStateID:        "FREE_STATEID",
	opGetDirDelegation:   "GET_DIR_DELEGATION",
	opGetDeviceInfo:      "GETDEVICEINFO",
	opGetDeviceList:      "GETDEVICELIST",
	opLayoutCommit:       "LAYOUTCOMMIT",
	opLayoutGet:          "LAYOUTGET",
	opLayoutReturn:       "LAYOUTRETURN",
	opSecinfoNoName:      "SECINFO_NO_NAME",
	opSequence:           "SEQUENCE",
	opSetSSV:             "SET_SSV",
	opTestStateID:        "TEST_STATEID",
	opWantDelegation:     "WANT_DELEGATION",
	opDestroyClientID:    "DESTROY_CLIENTID",
	opReclaimComplete:    "RECLAIM_COMPLETE",
	opAllocate:           "ALLOCATE",
	opCopy:               "COPY",
	opCopyNotify:         "COPY_NOTIFY",
	opDeallocate:         "DEALLOCATE",
	opIOAdvise:           "IO_ADVISE",
	opLayoutError:        "LAYOUTERROR",
	opLayoutStats:        "LAYOUTSTATS",
	opOffloadCancel:      "OFFLOAD_CANCEL",
	opOffloadStatus:      "OFFLOAD_STATUS",
	opReadPlus:           "READ_PLUS",
	opSeek:               "SEEK",
	opWriteSame:          "WRITE_SAME",
	opClone:              "CLONE",
	opGetXattr:           "GETXATTR",
	opSetXattr:           "SETXATTR",
	opListXattrs:         "LISTXATTRS",
	opRemoveXattr:        "REMOVEXATTR",
}

// OpName returns the name of NFSv4 operation op as the RFCs spell it
// without the OP_ prefix ("READ", "SEQUENCE"), "ILLEGAL" for OP_ILLEGAL,
// and "unknown" for numbers no minor version defines. It does not
// allocate, so it is safe on the data path (logs, metrics labels).
func OpName(op uint32) string {
	if op == opIllegal {
		return "ILLEGAL"
	}
	if op < uint32(len(opNames)) && opNames[op] != "" {
		return opNames[op]
	}
	return "unknown"
}

// knownOp reports whether some minor version (or RFC 8276) defines op.
func knownOp(op uint32) bool {
	return op == opIllegal || (op >= opAccess && op <= opRemoveXattr)
}
