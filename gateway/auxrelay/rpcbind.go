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
	var w xdrWriter
	host := t.advertise
	if !host.IsValid() || host.IsUnspecified() {
		host = local
	}
	if h.Proc == 0 { // NULL
		return oncrpc.Success, nil
	}
	if h.Vers == 2 {
		switch h.Proc {
		case 1, 2: // SET, UNSET: refused, the table is the relay's own
			w.u32(0)
		case 3: // GETPORT
			m, err := decodePmapMapping(args)
			if err != nil {
				return oncrpc.GarbageArgs, nil
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
			return oncrpc.ProcUnavail, nil
		}
		return oncrpc.Success, w.b
	}
	switch h.Proc {
	case 1, 2: // SET, UNSET
		w.u32(0)
	case 3, 9: // GETADDR, GETVERSADDR (v4)
		if h.Proc == 9 && h.Vers != 4 {
			return oncrpc.ProcUnavail, nil
		}
		r, err := decodeRPCB(args)
		if err != nil {
			return oncrpc.GarbageArgs, nil
		}
		nid := r.Netid
		if nid == "" {
			nid = netid // rpcbind itself looks up the query's own transport
		}
		addr := ""
		if e, ok := t.lookup(r.Prog, r.Vers, nid, h.Proc == 3); ok && host.IsValid() {
			addr = uaddr(host, e.Port)
		}
		w.str(addr)
	case 4: // DUMP
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
	case 6: // GETTIME
		w.u32(uint32(t.now().Unix()))
	case 7: // UADDR2TADDR
		d := newArgDecoder(args)
		s, err := d.String(maxRPCBString)
		if err != nil {
			return oncrpc.GarbageArgs, nil
		}
		ap, err := parseUaddr(string(s))
		if err != nil {
			w.u32(0) // empty netbuf: "cannot convert"
			w.opaque(nil)
			break
		}
		tb := taddrOf(ap)
		w.u32(uint32(len(tb)))
		w.opaque(tb)
	case 8: // TADDR2UADDR
		d := newArgDecoder(args)
		if _, err := d.Uint32(); err != nil { // maxlen
			return oncrpc.GarbageArgs, nil
		}
		b, err := d.Opaque(maxRPCBString)
		if err != nil {
			return oncrpc.GarbageArgs, nil
		}
		ap, err := parseTaddr(b)
		if err != nil {
			w.str("")
			break
		}
		w.str(uaddr(ap.Addr(), int(ap.Port())))
	case 11: // GETADDRLIST (v4)
		if h.Vers != 4 {
			return oncrpc.ProcUnavail, nil
		}
		r, err := decodeRPCB(args)
		if err != nil {
			return oncrpc.GarbageArgs, nil
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
	default: // CALLIT/BCAST, INDIRECT, GETSTAT and anything unknown
		return oncrpc.ProcUnavail, nil
	}
	return oncrpc.Success, w.b
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
