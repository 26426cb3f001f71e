package ulb

import "strconv"

// Procedure names, spelled as nfsstat and /proc/self/mountstats spell
// them, for metrics labels and logs.

var nfs2ProcNames = [...]string{
	"NULL", "GETATTR", "SETATTR", "ROOT", "LOOKUP", "READLINK", "READ",
	"WRITECACHE", "WRITE", "CREATE", "REMOVE", "RENAME", "LINK", "SYMLINK",
	"MKDIR", "RMDIR", "READDIR", "STATFS",
}

var nfs3ProcNames = [...]string{
	"NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ",
	"WRITE", "CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR",
	"RENAME", "LINK", "READDIR", "READDIRPLUS", "FSSTAT", "FSINFO",
	"PATHCONF", "COMMIT",
}

var nfs4ProcNames = [...]string{"NULL", "COMPOUND"}

// MOUNT: version 1 has 0..6, version 2 adds PATHCONF, version 3 drops
// EXPORTALL.
var mountProcNames = [...]string{
	"NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT", "EXPORTALL", "PATHCONF",
}

// NLM: 16..19 are unassigned; 20..23 exist from version 3 on.
var nlmProcNames = [...]string{
	"NULL", "TEST", "LOCK", "CANCEL", "UNLOCK", "GRANTED",
	"TEST_MSG", "LOCK_MSG", "CANCEL_MSG", "UNLOCK_MSG", "GRANTED_MSG",
	"TEST_RES", "LOCK_RES", "CANCEL_RES", "UNLOCK_RES", "GRANTED_RES",
	"", "", "", "",
	"SHARE", "UNSHARE", "NM_LOCK", "FREE_ALL",
}

var nsmProcNames = [...]string{
	"NULL", "STAT", "MON", "UNMON", "UNMON_ALL", "SIMU_CRASH", "NOTIFY",
}

// NFSACL: version 2 has 0..4, version 3 has 0..2.
var nfsaclProcNames = [...]string{"NULL", "GETACL", "SETACL", "GETATTR", "ACCESS"}

// ProcName returns the name of procedure proc of program prog, version
// vers, such as "READ" or "MNT", or "proc<N>" when the program version has
// no such procedure (or is not one of the NFS family).
func ProcName(prog, vers, proc uint32) string {
	if name := procName(prog, vers, proc); name != "" {
		return name
	}
	return "proc" + strconv.FormatUint(uint64(proc), 10)
}

// LookupProc is ProcName for procedures ulb knows only: ok is false
// when prog, vers or proc is not one of the NFS family's (versionKnown
// then says whether at least the program version is).
func LookupProc(prog, vers, proc uint32) (name string, versionKnown, ok bool) {
	name = procName(prog, vers, proc)
	// Every known version has procedure 0, NULL.
	return name, procName(prog, vers, 0) != "", name != ""
}

func procName(prog, vers, proc uint32) string {
	var names []string
	switch prog {
	case ProgNFS:
		switch vers {
		case 2:
			names = nfs2ProcNames[:]
		case 3:
			names = nfs3ProcNames[:]
		case 4:
			names = nfs4ProcNames[:]
		}
	case ProgMount:
		switch vers {
		case 1:
			names = mountProcNames[:mountPathconf]
		case 2:
			names = mountProcNames[:]
		case 3:
			names = mountProcNames[:mountExportall]
		}
	case ProgNLM:
		switch vers {
		case 1:
			names = nlmProcNames[:nlmGrantedRes+1]
		case 3, 4:
			names = nlmProcNames[:]
		}
	case ProgNSM:
		if vers == 1 {
			names = nsmProcNames[:]
		}
	case ProgNFSACL:
		switch vers {
		case 2:
			names = nfsaclProcNames[:]
		case 3:
			names = nfsaclProcNames[:aclGetattr]
		}
	}
	if proc < uint32(len(names)) {
		return names[proc]
	}
	return ""
}
