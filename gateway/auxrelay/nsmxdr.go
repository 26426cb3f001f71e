package auxrelay

import "github.com/rdmagw/rdmagw/xdr"

// NSM (status monitor, sm_inter.x) procedure numbers.
const (
	nsmNull      = 0
	nsmStat      = 1
	nsmMon       = 2
	nsmUnmon     = 3
	nsmUnmonAll  = 4
	nsmSimuCrash = 5
	nsmNotify    = 6
)

// smNotify is stat_chge, the argument of SM_NOTIFY:
//
//	struct stat_chge { string mon_name<SM_MAXSTRLEN>; int state; };
type smNotify struct {
	MonName []byte
	State   int32
}

// decodeSMNotify parses SM_NOTIFY's arguments.
func decodeSMNotify(args []byte) (smNotify, error) {
	d := xdr.NewDecoder(args)
	var n smNotify
	var err error
	if n.MonName, err = d.String(maxNLMString); err != nil {
		return n, err
	}
	n.State, err = d.Int32()
	return n, err
}

// encode appends stat_chge to w.
func (n *smNotify) encode(w *xdrWriter) {
	w.opaque(n.MonName)
	w.u32(uint32(n.State))
}
