package nfsmem

import (
	"encoding/binary"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// readReply bounds a READ result by the count asked (clamped to rtmax).
func readReply(d *nfsproto.Dec) int {
	d.Opaque(nfsproto.FHSize)
	d.Uint64()
	count := min(d.Uint32(), rtmax)
	return smallReply + int(count)
}

func nfs3Read(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	fh := d.Opaque(nfsproto.FHSize)
	off := d.Uint64()
	count := min(d.Uint32(), rtmax)
	return s.onObject(d, e, fh, regularFile, func(n *node) {
		var data []byte
		if off < uint64(len(n.data)) {
			data = n.data[off:min(off+uint64(count), uint64(len(n.data)))]
		}
		e.PutUint32(uint32(len(data)))
		e.PutBool(off+uint64(len(data)) >= uint64(len(n.data)))
		e.PutOpaque(data) // copied under the lock: the reply owns its bytes
	})
}

// regularFile is READ's demand: the object is a regular file.
func regularFile(n *node) nfsproto.Status {
	switch n.typ {
	case nfsproto.NF3Reg:
		return nfsproto.NFS3OK
	case nfsproto.NF3Dir:
		return nfsproto.NFS3ErrIsDir
	}
	return nfsproto.NFS3ErrInval
}

func (s *Server) writeVerf() [nfsproto.VerfSize]byte {
	var v [nfsproto.VerfSize]byte
	binary.BigEndian.PutUint64(v[:], s.instance)
	return v
}

func nfs3Write(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	fh := d.Opaque(nfsproto.FHSize)
	off := d.Uint64()
	count := d.Uint32()
	stable := d.Uint32()
	data := d.Opaque(-1)
	if err := d.Err(); err != nil {
		return err
	}
	if stable > nfsproto.FileSync {
		return nfsproto.ErrBadEnum
	}
	return s.changeObject(d, e, fh, func(n *node) nfsproto.Status {
		if st := regularFile(n); st != nfsproto.NFS3OK {
			return st
		}
		if int(count) != len(data) {
			// RFC 1813: count is the number of bytes of data; a client
			// that says otherwise sent something we cannot trust.
			return nfsproto.NFS3ErrInval
		}
		return s.fs.write(n, off, data)
	}, func(*node) {
		e.PutUint32(count)
		// Memory is as stable as this server gets: every write is
		// reported FILE_SYNC, and COMMIT has nothing left to do.
		e.PutUint32(nfsproto.FileSync)
		v := s.writeVerf()
		e.PutFixedOpaque(v[:])
	})
}

func nfs3Commit(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	fh := d.Opaque(nfsproto.FHSize)
	d.Uint64()
	d.Uint32()
	if err := d.Err(); err != nil {
		return err
	}
	s.fs.mu.RLock()
	defer s.fs.mu.RUnlock()
	n, st := s.node(fh)
	if st == nfsproto.NFS3OK && n.typ != nfsproto.NF3Reg {
		st = nfsproto.NFS3ErrInval
	}
	var before *nfsproto.WccAttr
	if n != nil {
		before = wccBefore(n)
	}
	s.putStatusWcc(e, st, before, n)
	if st == nfsproto.NFS3OK {
		v := s.writeVerf()
		e.PutFixedOpaque(v[:])
	}
	return nil
}
