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
	d.Uint64()
	d.FixedOpaque(nfsproto.VerfSize)
	return smallReply + int(min(d.Uint32(), maxDirReply))
}

func readdirplusReply(d *nfsproto.Dec) int {
	d.Opaque(nfsproto.FHSize)
	d.Uint64()
	d.FixedOpaque(nfsproto.VerfSize)
	d.Uint32() // dircount
	return smallReply + int(min(d.Uint32(), maxDirReply))
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

// readdirArgs are READDIR3args (dircount 0) and READDIRPLUS3args.
type readdirArgs struct {
	fh                 []byte
	cookie             uint64
	verf               []byte
	dircount, maxcount uint32
}

func decodeReaddir(d *nfsproto.Dec, plus bool) (readdirArgs, error) {
	var a readdirArgs
	a.fh = d.Opaque(nfsproto.FHSize)
	a.cookie = d.Uint64()
	a.verf = d.FixedOpaque(nfsproto.VerfSize)
	if plus {
		a.dircount = d.Uint32()
	}
	a.maxcount = min(d.Uint32(), maxDirReply)
	return a, d.Err()
}

// readdir is READDIR (plus false) and READDIRPLUS.
func (s *Server) readdir(d *nfsproto.Dec, e *xdr.Encoder, plus bool) error {
	a, err := decodeReaddir(d, plus)
	if err != nil {
		return err
	}
	s.fs.mu.RLock()
	defer s.fs.mu.RUnlock()
	ours := s.writeVerf()
	dir, st := s.node(a.fh)
	switch {
	case st != nfsproto.NFS3OK:
	case dir.typ != nfsproto.NF3Dir:
		st = nfsproto.NFS3ErrNotDir
	case a.cookie != 0 && binary.BigEndian.Uint64(a.verf) != 0 && string(a.verf) != string(ours[:]):
		st = nfsproto.NFS3ErrBadCookie
	}
	if st != nfsproto.NFS3OK {
		s.putStatusAttr(e, st, dir)
		return nil
	}
	p := dirPage{args: a, plus: plus, size: dirResFixed, eof: true}
	if p.add(".", dir, cookieDot) && p.add("..", s.fs.nodes[dir.parent], cookieDotDot) {
		ents := dir.dir.entries
		for i := dir.dir.after(a.cookie); i < len(ents); i++ {
			if !p.add(ents[i].name, s.fs.nodes[ents[i].id], ents[i].cookie) {
				break
			}
		}
	}
	if len(p.picks) == 0 && !p.eof {
		s.putStatusAttr(e, nfsproto.NFS3ErrTooSmall, dir)
		return nil
	}
	s.putStatusAttr(e, nfsproto.NFS3OK, dir)
	e.PutFixedOpaque(ours[:])
	s.putEntries(e, &p)
	return nil
}

// dirPage collects the entries that fit one READDIR(PLUS) reply before
// any is written: TOOSMALL must be decided before any entry is encoded.
type dirPage struct {
	args  readdirArgs
	plus  bool
	size  int // of the reply so far, against maxcount
	info  int // of the directory information so far, against dircount
	picks []dirPick
	eof   bool // every entry after the cookie fitted
}

type dirPick struct {
	name   string
	n      *node
	cookie uint64
}

// add takes the entry name (node n, cookie c) if it comes after the
// client's cookie and fits; false once one does not.
func (p *dirPage) add(name string, n *node, c uint64) bool {
	if c <= p.args.cookie {
		return true
	}
	if !p.fits(name) {
		p.eof = false
		return false
	}
	p.picks = append(p.picks, dirPick{name, n, c})
	return true
}

// fits counts an entry named name against maxcount (and READDIRPLUS's
// dircount, which the first entry may exceed); false if it does not fit.
func (p *dirPage) fits(name string) bool {
	sz := entryFixed + xdr.RoundUp(len(name))
	if p.plus {
		sz += entryPlusMore
	}
	di := dirInfoFixed + xdr.RoundUp(len(name))
	if p.size+sz > int(p.args.maxcount) || (p.plus && p.args.dircount > 0 && len(p.picks) > 0 && p.info+di > int(p.args.dircount)) {
		return false
	}
	p.size += sz
	p.info += di
	return true
}

// putEntries writes p's entries, the end of the list and eof.
func (s *Server) putEntries(e *xdr.Encoder, p *dirPage) {
	for _, pk := range p.picks {
		e.PutBool(true)
		e.PutUint64(pk.n.id)
		e.PutString(pk.name)
		e.PutUint64(pk.cookie)
		if p.plus {
			s.putAttr(e, pk.n)
			nfsproto.PutPostOpFH(e, s.handle(pk.n.id))
		}
	}
	e.PutBool(false)
	e.PutBool(p.eof)
}
