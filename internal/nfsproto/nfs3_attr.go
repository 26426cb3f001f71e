package nfsproto

import (
	"time"

	"github.com/rdmagw/rdmagw/xdr"
)

// Time is nfstime3.
type Time struct{ Sec, Nsec uint32 }

// TimeOf converts a Go time.
func TimeOf(t time.Time) Time {
	return Time{Sec: uint32(t.Unix()), Nsec: uint32(t.Nanosecond())}
}

// Go converts to a Go time.
func (t Time) Go() time.Time { return time.Unix(int64(t.Sec), int64(t.Nsec)) }

// PutTime writes an nfstime3.
func PutTime(e *xdr.Encoder, t Time) {
	e.PutUint32(t.Sec)
	e.PutUint32(t.Nsec)
}

// Fattr3 is fattr3 (RFC 1813 §2.5).
type Fattr3 struct {
	Type                 uint32
	Mode                 uint32
	Nlink, UID, GID      uint32
	Size, Used           uint64
	RdevMajor, RdevMinor uint32
	FSID, FileID         uint64
	Atime, Mtime, Ctime  Time
}

// FattrSize is the encoded size of a fattr3.
const FattrSize = 84

// Encode writes a.
func (a *Fattr3) Encode(e *xdr.Encoder) {
	e.PutUint32(a.Type)
	e.PutUint32(a.Mode)
	e.PutUint32(a.Nlink)
	e.PutUint32(a.UID)
	e.PutUint32(a.GID)
	e.PutUint64(a.Size)
	e.PutUint64(a.Used)
	e.PutUint32(a.RdevMajor)
	e.PutUint32(a.RdevMinor)
	e.PutUint64(a.FSID)
	e.PutUint64(a.FileID)
	PutTime(e, a.Atime)
	PutTime(e, a.Mtime)
	PutTime(e, a.Ctime)
}

// Decode reads a.
func (a *Fattr3) Decode(d *Dec) {
	a.Type, a.Mode, a.Nlink, a.UID, a.GID = d.Uint32(), d.Uint32(), d.Uint32(), d.Uint32(), d.Uint32()
	a.Size, a.Used = d.Uint64(), d.Uint64()
	a.RdevMajor, a.RdevMinor = d.Uint32(), d.Uint32()
	a.FSID, a.FileID = d.Uint64(), d.Uint64()
	a.Atime, a.Mtime, a.Ctime = d.Time(), d.Time(), d.Time()
}

// PutPostOpAttr writes post_op_attr: attributes when a is non-nil.
func PutPostOpAttr(e *xdr.Encoder, a *Fattr3) {
	e.PutBool(a != nil)
	if a != nil {
		a.Encode(e)
	}
}

// PostOpAttr reads post_op_attr; ok reports whether attributes followed.
func PostOpAttr(d *Dec) (a Fattr3, ok bool) {
	if ok = d.Bool(); ok {
		a.Decode(d)
	}
	return a, ok
}

// WccAttr is wcc_attr: the pre-operation attributes of weak cache
// consistency data.
type WccAttr struct {
	Size         uint64
	Mtime, Ctime Time
}

// Wcc is wcc_data.
type Wcc struct {
	Before *WccAttr
	After  *Fattr3
}

// Encode writes wcc_data.
func (w *Wcc) Encode(e *xdr.Encoder) {
	e.PutBool(w.Before != nil)
	if w.Before != nil {
		e.PutUint64(w.Before.Size)
		PutTime(e, w.Before.Mtime)
		PutTime(e, w.Before.Ctime)
	}
	PutPostOpAttr(e, w.After)
}

// Decode reads wcc_data.
func (w *Wcc) Decode(d *Dec) {
	*w = Wcc{}
	if d.Bool() {
		w.Before = &WccAttr{Size: d.Uint64(), Mtime: d.Time(), Ctime: d.Time()}
	}
	if a, ok := PostOpAttr(d); ok {
		w.After = &a
	}
}

// Sattr3 is sattr3: each field is set only when its Set flag is.
type Sattr3 struct {
	SetMode, SetUID, SetGID, SetSize bool
	Mode, UID, GID                   uint32
	Size                             uint64
	Atime, Mtime                     uint32 // time_how
	AtimeVal, MtimeVal               Time   // for SetToClientTime
}

// Encode writes a.
func (a *Sattr3) Encode(e *xdr.Encoder) {
	putSet32 := func(set bool, v uint32) {
		e.PutBool(set)
		if set {
			e.PutUint32(v)
		}
	}
	putSet32(a.SetMode, a.Mode)
	putSet32(a.SetUID, a.UID)
	putSet32(a.SetGID, a.GID)
	e.PutBool(a.SetSize)
	if a.SetSize {
		e.PutUint64(a.Size)
	}
	e.PutUint32(a.Atime)
	if a.Atime == SetToClientTime {
		PutTime(e, a.AtimeVal)
	}
	e.PutUint32(a.Mtime)
	if a.Mtime == SetToClientTime {
		PutTime(e, a.MtimeVal)
	}
}

// Decode reads a, failing d on a time_how out of range.
func (a *Sattr3) Decode(d *Dec) {
	*a = Sattr3{}
	if a.SetMode = d.Bool(); a.SetMode {
		a.Mode = d.Uint32()
	}
	if a.SetUID = d.Bool(); a.SetUID {
		a.UID = d.Uint32()
	}
	if a.SetGID = d.Bool(); a.SetGID {
		a.GID = d.Uint32()
	}
	if a.SetSize = d.Bool(); a.SetSize {
		a.Size = d.Uint64()
	}
	a.Atime, a.AtimeVal = decodeSetTime(d)
	a.Mtime, a.MtimeVal = decodeSetTime(d)
}

func decodeSetTime(d *Dec) (uint32, Time) {
	how := d.Uint32()
	switch how {
	case DontChange, SetToServerTime:
		return how, Time{}
	case SetToClientTime:
		return how, d.Time()
	}
	d.Fail(errBadEnum)
	return 0, Time{}
}

// PutPostOpFH writes post_op_fh3.
func PutPostOpFH(e *xdr.Encoder, fh []byte) {
	e.PutBool(fh != nil)
	if fh != nil {
		e.PutOpaque(fh)
	}
}

// PostOpFH reads post_op_fh3 (nil when absent). The handle is copied.
func PostOpFH(d *Dec) []byte {
	if !d.Bool() {
		return nil
	}
	return clone(d.Opaque(FHSize))
}

// FH reads an nfs_fh3 (a copy).
func FH(d *Dec) []byte { return clone(d.Opaque(FHSize)) }

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
