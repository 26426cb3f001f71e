package auxrelay

import (
	"strconv"

	"github.com/rdmagw/rdmagw/ulb"
)

// ONC RPC program numbers the relay knows.
const (
	progRPCBind = 100000
	progNFS     = 100003
	progMount   = 100005
	progNLM     = 100021
	progNSM     = 100024
)

// relayedVersions are the versions of each relayed program the relay
// advertises and accepts; the filer decides which it really serves.
var relayedVersions = map[uint32][]uint32{
	progMount: {1, 2, 3},
	progNLM:   {1, 3, 4},
	progNSM:   {1},
}

func versionOK(prog, vers uint32) (ok bool, low, high uint32) {
	vs := relayedVersions[prog]
	for _, v := range vs {
		if v == vers {
			return true, 0, 0
		}
	}
	return false, vs[0], vs[len(vs)-1]
}

// progLabel names a program for metrics and logs.
func progLabel(prog uint32) string {
	switch prog {
	case progRPCBind:
		return "rpcbind"
	case progNFS:
		return "nfs"
	case progMount:
		return "mount"
	case progNLM:
		return "nlm"
	case progNSM:
		return "nsm"
	}
	return "prog" + strconv.FormatUint(uint64(prog), 10)
}

var rpcbindProcNames = []string{"NULL", "SET", "UNSET", "GETADDR", "DUMP", "CALLIT", "GETTIME",
	"UADDR2TADDR", "TADDR2UADDR", "GETVERSADDR", "INDIRECT", "GETADDRLIST", "GETSTAT"}

// procLabel names a procedure for metrics and logs.
func procLabel(prog, vers, proc uint32) string {
	if prog == progRPCBind {
		if vers == 2 && proc == 3 {
			return "GETPORT"
		}
		if int(proc) < len(rpcbindProcNames) {
			return rpcbindProcNames[proc]
		}
		return "proc" + strconv.FormatUint(uint64(proc), 10)
	}
	return ulb.ProcName(prog, vers, proc)
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
