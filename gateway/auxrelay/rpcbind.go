package auxrelay

import (
	"net/netip"
	"time"

	"github.com/rdmagw/rdmagw/oncrpc"
)

// The rpcbind responder: PMAP v2 and RPCBIND v3/v4 answered from a fixed
// table of the relay's own services. Registration (SET/UNSET) is refused,
// indirect calls (CALLIT, INDIRECT, BCAST) are not served.
//
// Who asks what: mount.nfs asks PMAP v2 GETPORT for MOUNT over IPv4 and
// RPCBIND v4 then v3 GETADDR over IPv6 (nfs-utils getport.c); the kernel's
// lockd does the same for NLM (PMAP v2 for AF_INET, v4/v3 GETADDR for
// AF_INET6, net/sunrpc/rpcb_clnt.c). With proto=rdma and a port= option
// (or the default 20049) mount.nfs does not ask for NFS at all; the NFS
// entries are there for rpcinfo and for clients that do.

// rpcbEntry is one registration the responder reports.
type rpcbEntry struct {
	Prog, Vers uint32
	Netid      string // tcp, udp, tcp6, udp6, rdma, rdma6
	Port       int
}

// rpcbTable is the responder's view: its entries and the address it
// puts into universal addresses.
type rpcbTable struct {
	entries   []rpcbEntry
	advertise netip.Addr // invalid: use the address the query arrived on
	now       func() time.Time
}

// lookup finds prog/vers on netid; with anyVers, another version of prog
// on netid will do when vers is absent (rpcbind's find_service does so).
func (t *rpcbTable) lookup(prog, vers uint32, netid string, anyVers bool) (rpcbEntry, bool) {
	var other rpcbEntry
	found := false
	for _, e := range t.entries {
		if e.Prog != prog || e.Netid != netid {
			continue
		}
		if e.Vers == vers {
			return e, true
		}
		other, found = e, true
	}
	return other, found && anyVers
}

// serve answers one rpcbind call; local is the address the call arrived
// on, netid its transport ("tcp", "udp6", ...). It returns the accept
// status and, for SUCCESS, the results.
func (t *rpcbTable) serve(h *oncrpc.CallHeader, args []byte, netid string, local netip.Addr) (oncrpc.AcceptStat, []byte) {
	host := t.advertise
	if !host.IsValid() || host.IsUnspecified() {
		host = local
	}
	if h.Proc == 0 { // NULL
		return oncrpc.Success, nil
	}
	var w xdrWriter
	var st oncrpc.AcceptStat
	if h.Vers == 2 {
		st = t.servePmap(&w, h.Proc, args, netid)
	} else {
		st = t.serveRPCB(&w, h, args, netid, host)
	}
	if st != oncrpc.Success {
		return st, nil
	}
	return oncrpc.Success, w.b
}

// servePmap answers a PMAP (rpcbind version 2) procedure into w.
func (t *rpcbTable) servePmap(w *xdrWriter, proc uint32, args []byte, netid string) oncrpc.AcceptStat {
	switch proc {
	case 1, 2: // SET, UNSET: refused, the table is the relay's own
		w.u32(0)
	case 3: // GETPORT
		m, err := decodePmapMapping(args)
		if err != nil {
			return oncrpc.GarbageArgs
		}
		port := 0
		for _, nid := range pmapNetids(m.Prot, netid) {
			if e, ok := t.lookup(m.Prog, m.Vers, nid, true); ok {
				port = e.Port
				break
			}
		}
		w.u32(uint32(port))
	case 4: // DUMP
		for _, e := range t.entries {
			prot := netidProt(e.Netid)
			if prot == 0 || e.Netid[len(e.Netid)-1] == '6' {
				continue // PMAP v2 knows only IPv4 TCP and UDP
			}
			w.u32(1)
			w.u32(e.Prog)
			w.u32(e.Vers)
			w.u32(prot)
			w.u32(uint32(e.Port))
		}
		w.u32(0)
	default:
		return oncrpc.ProcUnavail
	}
	return oncrpc.Success
}

// serveRPCB answers an rpcbind version 3 or 4 procedure into w; host is
// the address the relay's entries are advertised at.
func (t *rpcbTable) serveRPCB(w *xdrWriter, h *oncrpc.CallHeader, args []byte, netid string, host netip.Addr) oncrpc.AcceptStat {
	switch h.Proc {
	case 1, 2: // SET, UNSET
		w.u32(0)
		return oncrpc.Success
	case 3, 9: // GETADDR, GETVERSADDR (v4)
		if h.Proc == 9 && h.Vers != 4 {
			return oncrpc.ProcUnavail
		}
		return t.getAddr(w, h.Proc == 3, args, netid, host)
	case 4: // DUMP
		t.dumpRPCB(w, host)
		return oncrpc.Success
	case 6: // GETTIME
		w.u32(uint32(t.now().Unix()))
		return oncrpc.Success
	case 7: // UADDR2TADDR
		return uaddrToTaddr(w, args)
	case 8: // TADDR2UADDR
		return taddrToUaddr(w, args)
	case 11: // GETADDRLIST (v4)
		if h.Vers != 4 {
			return oncrpc.ProcUnavail
		}
		return t.getAddrList(w, args, host)
	default: // CALLIT/BCAST, INDIRECT, GETSTAT and anything unknown
		return oncrpc.ProcUnavail
	}
}

// getAddr answers GETADDR (anyVers) or GETVERSADDR: the universal address
// of the program on the query's netid (its own transport when it names
// none), "" when there is none.
func (t *rpcbTable) getAddr(w *xdrWriter, anyVers bool, args []byte, netid string, host netip.Addr) oncrpc.AcceptStat {
	r, err := decodeRPCB(args)
	if err != nil {
		return oncrpc.GarbageArgs
	}
	nid := r.Netid
	if nid == "" {
		nid = netid // rpcbind itself looks up the query's own transport
	}
	addr := ""
	if e, ok := t.lookup(r.Prog, r.Vers, nid, anyVers); ok && host.IsValid() {
		addr = uaddr(host, e.Port)
	}
	w.str(addr)
	return oncrpc.Success
}

// dumpRPCB answers DUMP (versions 3 and 4): every entry at host.
func (t *rpcbTable) dumpRPCB(w *xdrWriter, host netip.Addr) {
	for _, e := range t.entries {
		if !host.IsValid() {
			break
		}
		w.u32(1)
		w.u32(e.Prog)
		w.u32(e.Vers)
		w.str(e.Netid)
		w.str(uaddr(host, e.Port))
		w.str("superuser")
	}
	w.u32(0)
}

// uaddrToTaddr answers UADDR2TADDR: a universal address as a netbuf (an
// empty one when it cannot be converted).
func uaddrToTaddr(w *xdrWriter, args []byte) oncrpc.AcceptStat {
	d := newArgDecoder(args)
	s, err := d.String(maxRPCBString)
	if err != nil {
		return oncrpc.GarbageArgs
	}
	ap, err := parseUaddr(string(s))
	if err != nil {
		w.u32(0) // empty netbuf: "cannot convert"
		w.opaque(nil)
		return oncrpc.Success
	}
	tb := taddrOf(ap)
	w.u32(uint32(len(tb)))
	w.opaque(tb)
	return oncrpc.Success
}

// taddrToUaddr answers TADDR2UADDR: a netbuf as a universal address (""
// when it cannot be converted).
func taddrToUaddr(w *xdrWriter, args []byte) oncrpc.AcceptStat {
	d := newArgDecoder(args)
	if _, err := d.Uint32(); err != nil { // maxlen
		return oncrpc.GarbageArgs
	}
	b, err := d.Opaque(maxRPCBString)
	if err != nil {
		return oncrpc.GarbageArgs
	}
	ap, err := parseTaddr(b)
	if err != nil {
		w.str("")
		return oncrpc.Success
	}
	w.str(uaddr(ap.Addr(), int(ap.Port())))
	return oncrpc.Success
}

// getAddrList answers GETADDRLIST (version 4): every address of the
// program version, with its netid, semantics, family and protocol.
func (t *rpcbTable) getAddrList(w *xdrWriter, args []byte, host netip.Addr) oncrpc.AcceptStat {
	r, err := decodeRPCB(args)
	if err != nil {
		return oncrpc.GarbageArgs
	}
	for _, e := range t.entries {
		if e.Prog != r.Prog || e.Vers != r.Vers || !host.IsValid() {
			continue
		}
		w.u32(1)
		w.str(uaddr(host, e.Port))
		w.str(e.Netid)
		sem := uint32(3) // NC_TPI_COTS_ORD
		proto := "tcp"
		switch netidProt(e.Netid) {
		case ipprotoUDP:
			sem, proto = 1, "udp" // NC_TPI_CLTS
		case 0:
			proto = "rdma"
		}
		w.u32(sem)
		fam := "inet"
		if e.Netid[len(e.Netid)-1] == '6' {
			fam = "inet6"
		}
		w.str(fam)
		w.str(proto)
	}
	w.u32(0)
	return oncrpc.Success
}

// pmapNetids are the netids a PMAP v2 query for prot may mean: the IPv4
// one first, then the IPv6 one when the query itself came over IPv6.
func pmapNetids(prot uint32, queryNetid string) []string {
	var base string
	switch prot {
	case ipprotoTCP:
		base = "tcp"
	case ipprotoUDP:
		base = "udp"
	default:
		return nil
	}
	if queryNetid != "" && queryNetid[len(queryNetid)-1] == '6' {
		return []string{base, base + "6"}
	}
	return []string{base}
}
