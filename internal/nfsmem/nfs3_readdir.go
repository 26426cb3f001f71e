package nfsmem

import (
	"encoding/binary"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// maxDirReply caps the reply size a client may ask READDIR* for.
const maxDirReply = 1 << 20

func readdirReply(d *nfsproto.Dec) int {
	d.Opaque(nfsproto.FHSize)
	d.U64()
	d.Fixed(nfsproto.VerfSize)
	return smallReply + int(min(d.U32(), maxDirReply))
}

func readdirplusReply(d *nfsproto.Dec) int {
	d.Opaque(nfsproto.FHSize)
	d.U64()
	d.Fixed(nfsproto.VerfSize)
	d.U32() // dircount
	return smallReply + int(min(d.U32(), maxDirReply))
}

func nfs3Readdir(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	return s.readdir(d, e, false)
}

func nfs3Readdirplus(s *Server, d *nfsproto.Dec, e *xdr.Encoder) error {
	return s.readdir(d, e, true)
}

// Sizes of READDIR(PLUS) results, for fitting entries into the client's
// count: the fixed part (status, dir attributes, verifier, the final
// value_follows and eof), and each entry's fixed part around its name.
const (
	dirResFixed   = 4 + 4 + nfsproto.FattrSize + nfsproto.VerfSize + 4 + 4
	entryFixed    = 4 + 8 + 4 + 8
	entryPlusMore = 4 + nfsproto.FattrSize + 4 + 4 + handleLen
	// dirInfoFixed is what counts against READDIRPLUS's dircount: the
	// fileid and cookie, plus the name.
	dirInfoFixed = 8 + 4 + 8
)

// readdir is READDIR (plus false) and READDIRPLUS.
func (s *Server) readdir(d *nfsproto.Dec, e *xdr.Encoder, plus bool) error {
	fh := d.Opaque(nfsproto.FHSize)
	cookie := d.U64()
	verf := d.Fixed(nfsproto.VerfSize)
	dircount := uint32(0)
	if plus {
		dircount = d.U32()
	}
	maxcount := d.U32()
	if err := d.Err(); err != nil {
		return err
	}
	maxcount = min(maxcount, maxDirReply)
	s.fs.mu.RLock()
	defer s.fs.mu.RUnlock()
	dir, st := s.node(fh)
	if st == nfsproto.NFS3OK && dir.typ != nfsproto.NF3Dir {
		st = nfsproto.NFS3ErrNotDir
	}
	ours := s.writeVerf()
	if st == nfsproto.NFS3OK && cookie != 0 && binary.BigEndian.Uint64(verf) != 0 && string(verf) != string(ours[:]) {
		st = nfsproto.NFS3ErrBadCookie
	}
	if st != nfsproto.NFS3OK {
		s.putStatusAttr(e, st, dir)
		return nil
	}

	// Collect what fits, then write: TOOSMALL must be decided before any
	// entry is encoded.
	type pick struct {
		name   string
		n      *node
		cookie uint64
	}
	var picks []pick
	size, info := dirResFixed, 0
	fits := func(name string) bool {
		sz := entryFixed + xdr.RoundUp(len(name))
		if plus {
			sz += entryPlusMore
		}
		di := dirInfoFixed + xdr.RoundUp(len(name))
		if size+sz > int(maxcount) || (plus && dircount > 0 && len(picks) > 0 && info+di > int(dircount)) {
			return false
		}
		size += sz
		info += di
		return true
	}
	eof := true
	add := func(name string, n *node, c uint64) bool {
		if c <= cookie {
			return true
		}
		if !fits(name) {
			eof = false
			return false
		}
		picks = append(picks, pick{name, n, c})
		return true
	}
	if add(".", dir, cookieDot) && add("..", s.fs.nodes[dir.parent], cookieDotDot) {
		ents := dir.dir.entries
		for i := dir.dir.after(cookie); i < len(ents); i++ {
			if !add(ents[i].name, s.fs.nodes[ents[i].id], ents[i].cookie) {
				break
			}
		}
	}
	if len(picks) == 0 && !eof {
		s.putStatusAttr(e, nfsproto.NFS3ErrTooSmall, dir)
		return nil
	}
	s.putStatusAttr(e, nfsproto.NFS3OK, dir)
	e.PutFixedOpaque(ours[:])
	for _, p := range picks {
		e.PutBool(true)
		e.PutUint64(p.n.id)
		e.PutString(p.name)
		e.PutUint64(p.cookie)
		if plus {
			s.putAttr(e, p.n)
			nfsproto.PutPostOpFH(e, s.handle(p.n.id))
		}
	}
	e.PutBool(false)
	e.PutBool(eof)
	return nil
}
