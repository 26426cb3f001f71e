package nfsproto

import "github.com/rdmagw/rdmagw/xdr"

// AuthSys is the body of an AUTH_SYS credential (RFC 5531 appendix A).
type AuthSys struct {
	Stamp       uint32
	MachineName string
	UID, GID    uint32
	GIDs        []uint32
}

// Encode returns the credential body.
func (a *AuthSys) Encode() []byte {
	b := make([]byte, 20+xdr.RoundUp(len(a.MachineName))+4*len(a.GIDs))
	e := xdr.NewEncoder(b)
	e.PutUint32(a.Stamp)
	e.PutString(a.MachineName)
	e.PutUint32(a.UID)
	e.PutUint32(a.GID)
	e.PutUint32(uint32(len(a.GIDs)))
	for _, g := range a.GIDs {
		e.PutUint32(g)
	}
	return e.Bytes()
}
