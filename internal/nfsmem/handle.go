package nfsmem

import (
	"encoding/binary"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

// handleLen is the size of our file handles: 8 bytes of server instance
// (so handles from a previous run are STALE, not silently another file)
// and 8 bytes of file id.
const handleLen = 16

func (s *Server) handle(id uint64) []byte {
	b := make([]byte, handleLen)
	binary.BigEndian.PutUint64(b, s.instance)
	binary.BigEndian.PutUint64(b[8:], id)
	return b
}

// node resolves a handle; the caller holds the fs lock.
func (s *Server) node(fh []byte) (*node, nfsproto.Status) {
	if len(fh) != handleLen {
		return nil, nfsproto.NFS3ErrBadHandle
	}
	if binary.BigEndian.Uint64(fh) != s.instance {
		return nil, nfsproto.NFS3ErrStale
	}
	n, ok := s.fs.nodes[binary.BigEndian.Uint64(fh[8:])]
	if !ok {
		return nil, nfsproto.NFS3ErrStale
	}
	return n, nfsproto.NFS3OK
}
