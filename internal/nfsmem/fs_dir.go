package nfsmem

import (
	"sort"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

// dirent is one directory entry. Its cookie never changes and is never
// reused in its directory, so a READDIR continued after entries were added
// or removed neither repeats nor skips the entries that stayed.
type dirent struct {
	name   string
	id     uint64
	cookie uint64
}

// Cookies 1 and 2 are "." and ".."; entries start after them.
const (
	cookieDot    = 1
	cookieDotDot = 2
	firstCookie  = 3
)

type dirData struct {
	entries    []dirent // ascending cookie
	byName     map[string]uint64
	nextCookie uint64
	subdirs    int
}

func newDirData() *dirData {
	return &dirData{byName: make(map[string]uint64), nextCookie: firstCookie}
}

func (d *dirData) add(name string, id uint64) {
	d.entries = append(d.entries, dirent{name: name, id: id, cookie: d.nextCookie})
	d.nextCookie++
	d.byName[name] = id
}

func (d *dirData) del(name string) {
	delete(d.byName, name)
	for i := range d.entries {
		if d.entries[i].name == name {
			d.entries = append(d.entries[:i], d.entries[i+1:]...)
			return
		}
	}
}

// after returns the index of the first entry with a cookie above c.
func (d *dirData) after(c uint64) int {
	return sort.Search(len(d.entries), func(i int) bool { return d.entries[i].cookie > c })
}

// checkName validates a name for an entry to be created.
func checkName(name []byte) nfsproto.Status {
	switch {
	case len(name) == 0:
		return nfsproto.NFS3ErrInval
	case len(name) > nfsproto.MaxName:
		return nfsproto.NFS3ErrNameTooLong
	case string(name) == "." || string(name) == "..":
		return nfsproto.NFS3ErrExist
	}
	for _, c := range name {
		if c == '/' || c == 0 {
			return nfsproto.NFS3ErrInval
		}
	}
	return nfsproto.NFS3OK
}

// lookup finds name in dir ("." and ".." included).
func (f *fs) lookup(dir *node, name string) (*node, nfsproto.Status) {
	if dir.typ != nfsproto.NF3Dir {
		return nil, nfsproto.NFS3ErrNotDir
	}
	switch name {
	case ".":
		return dir, nfsproto.NFS3OK
	case "..":
		return f.nodes[dir.parent], nfsproto.NFS3OK
	}
	if len(name) > nfsproto.MaxName {
		return nil, nfsproto.NFS3ErrNameTooLong
	}
	id, ok := dir.dir.byName[name]
	if !ok {
		return nil, nfsproto.NFS3ErrNoEnt
	}
	return f.nodes[id], nfsproto.NFS3OK
}

// link adds child to dir under name (checked by the caller).
func (f *fs) link(dir *node, name string, child *node) {
	dir.dir.add(name, child.id)
	if child.typ == nfsproto.NF3Dir {
		child.parent = dir.id
		dir.dir.subdirs++
	}
	f.touch(dir)
}

// unlink removes name (naming child) from dir.
func (f *fs) unlink(dir *node, name string, child *node) {
	dir.dir.del(name)
	if child.typ == nfsproto.NF3Dir {
		dir.dir.subdirs--
	}
	f.touch(dir)
}

// isAncestor reports whether a is d or one of d's ancestors.
func (f *fs) isAncestor(a, d *node) bool {
	for {
		if d.id == a.id {
			return true
		}
		if d.id == rootID {
			return false
		}
		d = f.nodes[d.parent]
	}
}
