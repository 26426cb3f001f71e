//go:build ibverbs && cgo

package ibverbs

// nldev.go: the RDMA device ↔ netdev mapping from RDMA netlink (NLDEV,
// what `rdma link` shows). rdmamap reads it from the RoCE GID table in
// sysfs, which an iWARP device does not fill (siw: gid_attrs/ndevs/0 reads
// EINVAL, and the device has no parent with a net/ directory either); the
// kernel still knows each port's netdev (ib_device_set_netdev) and reports
// it in a PORT_GET reply.

import (
	"encoding/binary"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// RDMA netlink, include/uapi/rdma/rdma_netlink.h.
const (
	nlClientNLDev   = 5 // RDMA_NL_NLDEV
	nlClientShift   = 10
	nldevCmdGet     = 1 // RDMA_NLDEV_CMD_GET
	nldevCmdPortGet = 5 // RDMA_NLDEV_CMD_PORT_GET
	nldevDevIndex   = 1 // RDMA_NLDEV_ATTR_DEV_INDEX, u32
	nldevDevName    = 2 // RDMA_NLDEV_ATTR_DEV_NAME, string
	nldevPortIndex  = 3 // RDMA_NLDEV_ATTR_PORT_INDEX, u32
	nldevNdevName   = 51
)

// nldevAttrs decodes a netlink attribute list (struct nlattr: length,
// type, value padded to 4 bytes) into type → value; the last of a
// repeated type wins. A truncated or malformed list is an error.
func nldevAttrs(b []byte) (map[uint16][]byte, error) {
	out := map[uint16][]byte{}
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, fmt.Errorf("ibverbs: netlink attribute header: %d bytes left", len(b))
		}
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff // without NLA_F_NESTED/NET_BYTEORDER
		if l < 4 || l > len(b) {
			return nil, fmt.Errorf("ibverbs: netlink attribute %d: length %d of %d bytes", typ, l, len(b))
		}
		out[typ] = b[4:l]
		l = (l + 3) &^ 3
		if l > len(b) {
			l = len(b)
		}
		b = b[l:]
	}
	return out, nil
}

// nlString is a NUL-terminated string attribute's text.
func nlString(v []byte) string {
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

func nlU32(v []byte) (uint32, bool) {
	if len(v) < 4 {
		return 0, false
	}
	return binary.NativeEndian.Uint32(v), true
}

// nldevNetdevs asks the kernel for every RDMA device's ports and returns
// device name → the netdevs of its ports (in port order).
func nldevNetdevs() (map[string][]string, error) {
	req := nl.NewNetlinkRequest(nlClientNLDev<<nlClientShift|nldevCmdGet, unix.NLM_F_DUMP)
	msgs, err := req.Execute(unix.NETLINK_RDMA, 0)
	if err != nil {
		return nil, fmt.Errorf("ibverbs: RDMA netlink device dump: %w", err)
	}
	out := map[string][]string{}
	for _, m := range msgs {
		a, err := nldevAttrs(m)
		if err != nil {
			return nil, err
		}
		idx, ok := nlU32(a[nldevDevIndex])
		name := nlString(a[nldevDevName])
		if !ok || name == "" {
			continue
		}
		preq := nl.NewNetlinkRequest(nlClientNLDev<<nlClientShift|nldevCmdPortGet, unix.NLM_F_DUMP)
		preq.AddData(nl.NewRtAttr(nldevDevIndex, nl.Uint32Attr(idx)))
		ports, err := preq.Execute(unix.NETLINK_RDMA, 0)
		if err != nil {
			return nil, fmt.Errorf("ibverbs: RDMA netlink port dump of %s: %w", name, err)
		}
		for _, p := range ports {
			pa, err := nldevAttrs(p)
			if err != nil {
				return nil, err
			}
			if nd := nlString(pa[nldevNdevName]); nd != "" {
				out[name] = append(out[name], nd)
			}
		}
	}
	return out, nil
}

// nldevDeviceFor is the RDMA device whose port sits on netdev ifname.
func nldevDeviceFor(ifname string) (string, error) {
	m, err := nldevNetdevs()
	if err != nil {
		return "", err
	}
	for dev, nds := range m {
		for _, nd := range nds {
			if nd == ifname {
				return dev, nil
			}
		}
	}
	return "", fmt.Errorf("ibverbs: no RDMA device has a port on %s (RDMA netlink)", ifname)
}
