package ulb

// The NFSv2/v3 auxiliary programs (RFC 8267 §5): MOUNT, NLM, NSM and
// NFSACL have no DDP-eligible items, so their walkers stop at once. They
// still need reply size estimates: NFSACL travels on the NFS connection
// (over RDMA), and a gateway may relay the others over RDMA too.
//
// Versions: MOUNT 1 and 2 (NFSv2; 2 adds PATHCONF) and 3; NLM 1, 3 and 4
// (3 adds the share procedures, 4 has 64-bit ranges); NSM 1; NFSACL 2 and 3
// (RFC 8267 says version 1, an erratum: Linux and Solaris speak 2 and 3).

func init() {
	for _, v := range []uint32{1, 2, 3} {
		register(ProgMount, v, &binding{call: none, reply: none, estimate: mountEstimate(v)})
	}
	for _, v := range []uint32{1, 3, 4} {
		register(ProgNLM, v, &binding{call: none, reply: none, estimate: nlmEstimate(v)})
	}
	register(ProgNSM, 1, &binding{call: none, reply: none, estimate: nsmEstimate})
	for _, v := range []uint32{2, 3} {
		register(ProgNFSACL, v, &binding{call: none, reply: none, estimate: nfsaclEstimate(v)})
	}
}

// auxListGuess is the Inline guess for replies the call cannot bound
// (MOUNT DUMP and EXPORT lists): they are marked Unpredictable, and a
// requester that finds the guess short retries with a larger Reply chunk
// (RFC 8267 §3.1).
const auxListGuess = 64 << 10

// MOUNT (RFC 1094 appendix A, RFC 1813 appendix I) procedure numbers.
const (
	mountNull      = 0
	mountMnt       = 1
	mountDump      = 2
	mountUmnt      = 3
	mountUmntall   = 4
	mountExport    = 5
	mountExportall = 6 // versions 1 and 2
	mountPathconf  = 7 // version 2
)

// mountAuthFlavors is the guess for MNT3's auth_flavors<>, which XDR leaves
// unbounded: Linux clients keep at most NFS_MAX_SECFLAVORS (12).
const mountAuthFlavors = 12

func mountEstimate(vers uint32) func(proc uint32, args []byte) (Estimate, error) {
	return func(proc uint32, args []byte) (Estimate, error) {
		switch proc {
		case mountMnt:
			if vers == 3 {
				// mountres3: mountstat3 status; fhandle3 fhandle
				// (opaque<64>); int auth_flavors<>.
				return v23Guess(4 + nfs3Fh + 4 + 4*mountAuthFlavors), nil
			}
			// fhstatus: unsigned status; fhandle directory[32].
			return v23Fixed(4 + nfs2Fh), nil
		case mountDump, mountExport:
			return v23Guess(auxListGuess), nil
		case mountExportall:
			if vers < 3 {
				return v23Guess(auxListGuess), nil
			}
		case mountPathconf:
			if vers == 2 {
				// ppathcnf: int pc_link_max, five shorts, two chars and
				// short pc_mask[2], each one XDR word.
				return v23Fixed(10 * 4), nil
			}
		}
		// NULL, UMNT, UMNTALL: void; unknown: PROC_UNAVAIL.
		return v23Fixed(0), nil
	}
}

// NLM procedure numbers (nlm_prot.x; the same in versions 1, 3 and 4).
const (
	nlmTest       = 1
	nlmLock       = 2
	nlmCancel     = 3
	nlmUnlock     = 4
	nlmGranted    = 5
	nlmTestMsg    = 6  // 6..15: the asynchronous _MSG and _RES calls,
	nlmGrantedRes = 15 // whose replies are void
	nlmShare      = 20 // versions 3 and 4
	nlmUnshare    = 21
	nlmNmLock     = 22
	nlmFreeAll    = 23
)

// nlmNetobj is the largest netobj: opaque<MAXNETOBJ_SZ> (1024).
const nlmNetobj = 4 + 1024

func nlmEstimate(vers uint32) func(proc uint32, args []byte) (Estimate, error) {
	// nlm_res: netobj cookie; nlm_stat stat.
	const res = nlmNetobj + 4
	return func(proc uint32, args []byte) (Estimate, error) {
		switch {
		case proc == nlmTest:
			// nlm_testres: netobj cookie; nlm_testrply stat, which on
			// nlm_denied holds nlm_holder { bool exclusive; int svid;
			// netobj oh; offset; length }, unsigned or (v4) uint64.
			rng := 2 * 4
			if vers == 4 {
				rng = 2 * 8
			}
			return v23Fixed(res + 4 + 4 + nlmNetobj + rng), nil
		case proc >= nlmLock && proc <= nlmGranted:
			return v23Fixed(res), nil
		case vers >= 3 && (proc == nlmShare || proc == nlmUnshare):
			// nlm_shareres: netobj cookie; nlm_stats stat; int sequence.
			return v23Fixed(res + 4), nil
		case vers >= 3 && proc == nlmNmLock:
			return v23Fixed(res), nil
		}
		// NULL, _MSG, _RES, FREE_ALL: void; unknown: PROC_UNAVAIL.
		return v23Fixed(0), nil
	}
}

// NSM (XNFS chapter 11, sm_inter.x) procedure numbers.
const (
	nsmStat     = 1
	nsmMon      = 2
	nsmUnmon    = 3
	nsmUnmonAll = 4
)

func nsmEstimate(proc uint32, args []byte) (Estimate, error) {
	switch proc {
	case nsmStat, nsmMon:
		return v23Fixed(4 + 4), nil // sm_stat_res: res_stat; int state
	case nsmUnmon, nsmUnmonAll:
		return v23Fixed(4), nil // sm_stat: int state
	}
	// NULL, SIMU_CRASH, NOTIFY: void; unknown: PROC_UNAVAIL.
	return v23Fixed(0), nil
}

// NFSACL procedure numbers (Linux include/uapi/linux/nfsacl.h).
const (
	aclGetacl  = 1
	aclSetacl  = 2
	aclGetattr = 3 // version 2
	aclAccess  = 4 // version 2
)

// nfsaclMaxEntries bounds the entries of one ACL. The protocol has no
// limit (RFC 8267 §5.2); this is Linux's NFS_ACL_MAX_ENTRIES, beyond which
// its client and server refuse an ACL.
const nfsaclMaxEntries = 1024

// nfsaclACL is the largest encoded ACL: unsigned entry count, then the
// array of entries { int type; unsigned id; unsigned perm } with its own
// count word.
const nfsaclACL = 4 + 4 + 3*4*nfsaclMaxEntries

func nfsaclEstimate(vers uint32) func(proc uint32, args []byte) (Estimate, error) {
	attr := nfs2Fattr // version 2 returns fattr
	if vers == 3 {
		attr = nfs3PostOpAttr
	}
	return func(proc uint32, args []byte) (Estimate, error) {
		switch {
		case proc == aclGetacl:
			// GETACL result: status; attributes; unsigned mask; the
			// access ACL; the default ACL. Bounded only by the entry
			// limit above: marked Unpredictable so a requester may use
			// short Reply chunk retry, which RFC 8267 §5.2 allows here.
			return v23Guess(4 + attr + 4 + 2*nfsaclACL), nil
		case proc == aclSetacl:
			return v23Fixed(4 + attr), nil // status; attributes
		case vers == 2 && proc == aclGetattr:
			return v23Fixed(4 + nfs2Fattr), nil // attrstat
		case vers == 2 && proc == aclAccess:
			return v23Fixed(4 + nfs2Fattr + 4), nil // status; fattr; access
		}
		// NULL: void; unknown: PROC_UNAVAIL.
		return v23Fixed(0), nil
	}
}
