package nfsmem

import (
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// callRecord builds an RPC call record for the fuzz seeds.
func callRecord(prog, vers, proc uint32, args []byte) []byte {
	h := oncrpc.CallHeader{XID: 1, RPCVers: oncrpc.RPCVersion, Prog: prog, Vers: vers, Proc: proc,
		Cred: oncrpc.NullAuth, Verf: oncrpc.NullAuth}
	b := make([]byte, 64+len(args))
	e := xdr.NewEncoder(b)
	_ = h.Encode(&e)
	return append(e.Bytes(), args...)
}

// FuzzAnswer feeds arbitrary call records to the server: it must never
// panic, and every call it answers gets a reply that decodes.
func FuzzAnswer(f *testing.F) {
	s := New(Config{MaxBytes: 1 << 20})
	root := s.handle(rootID)
	fhArg := append([]byte{0, 0, 0, handleLen}, root...)
	for proc := uint32(0); proc < nfsproto.NFS3NumProcs; proc++ {
		f.Add(callRecord(nfsproto.ProgNFS, 3, proc, fhArg))
		f.Add(callRecord(nfsproto.ProgNFS, 3, proc, append(append([]byte{}, fhArg...), 0, 0, 0, 1, 'x', 0, 0, 0, 0, 0, 0, 1)))
	}
	f.Add(callRecord(nfsproto.ProgMount, 3, nfsproto.MountMnt, []byte{0, 0, 0, 1, '/', 0, 0, 0}))
	f.Add(callRecord(nfsproto.ProgMount, 3, nfsproto.MountExport, nil))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, call []byte) {
		reply, _ := s.answer(call, nil)
		if reply == nil {
			return
		}
		var h oncrpc.ReplyHeader
		if _, err := h.Decode(reply); err != nil {
			t.Fatalf("reply header does not decode: %v", err)
		}
	})
}
