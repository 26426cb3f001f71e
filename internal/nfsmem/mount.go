package nfsmem

import (
	"strings"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/oncrpc"
	"github.com/rdmagw/rdmagw/xdr"
)

// exportPath is the one export: the root of the memory file system.
const exportPath = "/"

var mountProcs = [...]procedure{
	nfsproto.MountNull:    {run: mountVoid, maxReply: fixedReply},
	nfsproto.MountMnt:     {run: mountMnt, maxReply: fixedReply},
	nfsproto.MountDump:    {run: mountDump, maxReply: fixedReply},
	nfsproto.MountUmnt:    {run: mountUmnt, maxReply: fixedReply},
	nfsproto.MountUmntall: {run: mountVoid, maxReply: fixedReply},
	nfsproto.MountExport:  {run: mountExport, maxReply: fixedReply},
}

func mountVoid(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error { return nil }

// mountMnt answers MNT: the handle of the directory path names inside
// the export ("/" is the root; "" is the root too, as libnfs sends it for
// a URL without a directory; a subdirectory may be mounted, as knfsd
// allows), MNT3ERR_NOENT or MNT3ERR_NOTDIR otherwise.
func mountMnt(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	path := d.Opaque(nfsproto.MountPathLen)
	if err := d.Err(); err != nil {
		return err
	}
	s.fs.mu.RLock()
	n, st := s.walk(string(path))
	s.fs.mu.RUnlock()
	if st != nfsproto.MNT3OK {
		e.PutUint32(st)
		return nil
	}
	e.PutUint32(nfsproto.MNT3OK)
	e.PutOpaque(s.handle(n.id))
	e.PutUint32(2) // auth flavors accepted
	e.PutUint32(uint32(oncrpc.AuthSys))
	e.PutUint32(uint32(oncrpc.AuthNone))
	return nil
}

// walk resolves an absolute path from the root to a directory, giving a
// MOUNT status. The caller holds the fs lock.
func (s *Server) walk(path string) (*node, uint32) {
	n := s.fs.nodes[rootID]
	for _, name := range strings.Split(path, "/") {
		if name == "" || name == "." {
			continue
		}
		next, st := s.fs.lookup(n, name)
		if st != nfsproto.NFS3OK {
			return nil, nfsproto.MNT3ErrNoEnt
		}
		n = next
	}
	if n.typ != nfsproto.NF3Dir {
		return nil, nfsproto.MNT3ErrNotDir
	}
	return n, nfsproto.MNT3OK
}

// mountDump answers DUMP with an empty list: the server keeps no mount
// table (RFC 1813 calls the list advisory).
func mountDump(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	e.PutBool(false)
	return nil
}

func mountUmnt(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	d.Opaque(nfsproto.MountPathLen)
	return d.Err()
}

// mountExport lists "/" open to everyone (no groups).
func mountExport(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	e.PutBool(true)
	e.PutString(exportPath)
	e.PutBool(false) // no groups
	e.PutBool(false) // end of list
	return nil
}
