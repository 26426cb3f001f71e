package auxrelay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/rdmagw/rdmagw/xdr"
)

// rpcbind wire types (RFC 1833). PMAP version 2 speaks in (prog, vers,
// IP protocol, port) mappings; RPCBIND versions 3 and 4 in netids and
// universal addresses ("h1.h2.h3.h4.p1.p2").

const (
	ipprotoTCP = 6
	ipprotoUDP = 17
)

// maxRPCBString bounds netid, uaddr and owner strings; RFC 1833 leaves
// them unbounded, real ones are a few dozen bytes.
const maxRPCBString = 1024

// pmapMapping is struct mapping { prog, vers, prot, port }.
type pmapMapping struct{ Prog, Vers, Prot, Port uint32 }

func decodePmapMapping(args []byte) (pmapMapping, error) {
	d := xdr.NewDecoder(args)
	var m pmapMapping
	var err error
	for _, p := range []*uint32{&m.Prog, &m.Vers, &m.Prot, &m.Port} {
		if *p, err = d.Uint32(); err != nil {
			return m, err
		}
	}
	return m, nil
}

// rpcbArgs is struct rpcb { r_prog, r_vers, r_netid, r_addr, r_owner }.
type rpcbArgs struct {
	Prog, Vers         uint32
	Netid, Addr, Owner string
}

func decodeRPCB(args []byte) (rpcbArgs, error) {
	d := xdr.NewDecoder(args)
	var r rpcbArgs
	var err error
	if r.Prog, err = d.Uint32(); err != nil {
		return r, err
	}
	if r.Vers, err = d.Uint32(); err != nil {
		return r, err
	}
	for _, s := range []*string{&r.Netid, &r.Addr, &r.Owner} {
		b, err := d.String(maxRPCBString)
		if err != nil {
			return r, err
		}
		*s = string(b)
	}
	return r, nil
}

// uaddr formats a universal address (RFC 5665 §5.2.3.3/4).
func uaddr(ip netip.Addr, port int) string {
	return ip.Unmap().String() + "." + strconv.Itoa(port>>8) + "." + strconv.Itoa(port&0xff)
}

var errBadUaddr = errors.New("rpcbind: malformed universal address")

// parseUaddr is the inverse of uaddr.
func parseUaddr(s string) (netip.AddrPort, error) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return netip.AddrPort{}, errBadUaddr
	}
	j := strings.LastIndexByte(s[:i], '.')
	if j < 0 {
		return netip.AddrPort{}, errBadUaddr
	}
	hi, err1 := strconv.ParseUint(s[j+1:i], 10, 8)
	lo, err2 := strconv.ParseUint(s[i+1:], 10, 8)
	ip, err3 := netip.ParseAddr(s[:j])
	if err1 != nil || err2 != nil || err3 != nil {
		return netip.AddrPort{}, errBadUaddr
	}
	return netip.AddrPortFrom(ip, uint16(hi<<8|lo)), nil
}

// Linux struct sockaddr_in / sockaddr_in6 as rpcbind's netbuf carries
// them (sa_family in host byte order, little-endian here; port and
// address in network order).
const (
	afINET  = 2
	afINET6 = 10
)

func taddrOf(ap netip.AddrPort) []byte {
	if ap.Addr().Is4() || ap.Addr().Is4In6() {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint16(b, afINET)
		binary.BigEndian.PutUint16(b[2:], ap.Port())
		a4 := ap.Addr().Unmap().As4()
		copy(b[4:], a4[:])
		return b
	}
	b := make([]byte, 28)
	binary.LittleEndian.PutUint16(b, afINET6)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	a16 := ap.Addr().As16()
	copy(b[8:], a16[:])
	return b
}

func parseTaddr(b []byte) (netip.AddrPort, error) {
	if len(b) < 2 {
		return netip.AddrPort{}, fmt.Errorf("rpcbind: taddr of %d bytes", len(b))
	}
	switch binary.LittleEndian.Uint16(b) {
	case afINET:
		if len(b) >= 8 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:])), nil
		}
	case afINET6:
		if len(b) >= 24 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), binary.BigEndian.Uint16(b[2:])), nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("rpcbind: taddr family/length not understood (%d bytes)", len(b))
}

// netidProt maps a netid to its PMAP protocol number (0 for rdma).
func netidProt(netid string) uint32 {
	switch netid {
	case "tcp", "tcp6":
		return ipprotoTCP
	case "udp", "udp6":
		return ipprotoUDP
	}
	return 0
}
