package nfsclient

import (
	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// encodeArgs runs put on an encoder over a buffer of size bytes and
// returns what it wrote. size is an upper bound the caller computes from
// the variable parts (names, data); an overflow is a bug and reported.
func encodeArgs(size int, put func(e *xdr.Encoder)) ([]byte, error) {
	e := xdr.NewEncoder(make([]byte, size))
	put(&e)
	if err := e.Err(); err != nil {
		return nil, err
	}
	return e.Bytes(), nil
}

// fixedArgs bounds arguments made of handles, counters and a sattr3.
const fixedArgs = 512

// putDirOp writes diropargs3.
func putDirOp(e *xdr.Encoder, dir []byte, name string) {
	e.PutOpaque(dir)
	e.PutString(name)
}

// checkStatus reads an nfsstat3 and returns it as an error when it is not
// NFS3_OK (nil otherwise).
func checkStatus(d *nfsproto.Dec) error {
	st := nfsproto.Status(d.Uint32())
	if err := d.Err(); err != nil {
		return err
	}
	if st != nfsproto.NFS3OK {
		return st
	}
	return nil
}
