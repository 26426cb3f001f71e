package nfsclient

import (
	"context"
	"fmt"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
	"github.com/rdmagw/rdmagw/xdr"
)

// Mount is a MOUNT v3 client (RFC 1813 §5).
type Mount struct{ T Transport }

// MountError is a MOUNT status other than MNT3_OK.
type MountError uint32

func (e MountError) Error() string { return fmt.Sprintf("mount: status %d", uint32(e)) }

// Export is one entry of the server's export list.
type Export struct {
	Dir    string
	Groups []string
}

func (m *Mount) call(ctx context.Context, proc uint32, args []byte) (*nfsproto.Dec, error) {
	res, err := m.T.Call(ctx, nfsproto.ProgMount, nfsproto.MountVers3, proc, args)
	if err != nil {
		return nil, err
	}
	return nfsproto.NewDec(res), nil
}

// Null pings the MOUNT service.
func (m *Mount) Null(ctx context.Context) error {
	_, err := m.call(ctx, nfsproto.MountNull, nil)
	return err
}

// Mnt mounts path and returns its root file handle and the auth flavors
// the server accepts for it.
func (m *Mount) Mnt(ctx context.Context, path string) (fh []byte, flavors []uint32, err error) {
	args, err := encodeArgs(8+len(path), func(e *xdr.Encoder) { e.PutString(path) })
	if err != nil {
		return nil, nil, err
	}
	d, err := m.call(ctx, nfsproto.MountMnt, args)
	if err != nil {
		return nil, nil, err
	}
	if st := d.Uint32(); st != nfsproto.MNT3OK {
		if d.Err() != nil {
			return nil, nil, d.Err()
		}
		return nil, nil, MountError(st)
	}
	fh = nfsproto.FH(d)
	n := int(d.Uint32())
	for i := 0; i < n && d.Err() == nil; i++ {
		flavors = append(flavors, d.Uint32())
	}
	return fh, flavors, d.Err()
}

// Umnt tells the server path is no longer mounted.
func (m *Mount) Umnt(ctx context.Context, path string) error {
	args, err := encodeArgs(8+len(path), func(e *xdr.Encoder) { e.PutString(path) })
	if err != nil {
		return err
	}
	_, err = m.call(ctx, nfsproto.MountUmnt, args)
	return err
}

// Exports lists the server's exports.
func (m *Mount) Exports(ctx context.Context) ([]Export, error) {
	d, err := m.call(ctx, nfsproto.MountExport, nil)
	if err != nil {
		return nil, err
	}
	var out []Export
	for d.Bool() {
		ex := Export{Dir: string(d.Opaque(nfsproto.MountPathLen))}
		for d.Bool() {
			ex.Groups = append(ex.Groups, string(d.Opaque(255)))
		}
		out = append(out, ex)
	}
	return out, d.Err()
}

// MountRoot dials the MOUNT v3 service at mountAddr over TCP (MOUNT is
// never on the data path, so every transport's users mount this way),
// mounts export and returns its root file handle.
func MountRoot(ctx context.Context, mountAddr, export string) ([]byte, error) {
	mt, err := DialTCP(ctx, mountAddr)
	if err != nil {
		return nil, fmt.Errorf("MOUNT service %s: %w", mountAddr, err)
	}
	defer mt.Close()
	root, _, err := (&Mount{T: mt}).Mnt(ctx, export)
	if err != nil {
		return nil, fmt.Errorf("MOUNT %s at %s: %w", export, mountAddr, err)
	}
	return root, nil
}
