//go:build ibverbs && cgo

package ibverbs

/*
#cgo LDFLAGS: -libverbs -lrdmacm
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"unsafe"

	"github.com/Mellanox/rdmamap"
	"github.com/rdmagw/rdmagw/verbs"
)

func init() { verbs.Register(New()) }

type provider struct{}

// New returns the libibverbs provider. The package registers it as
// "ibverbs".
func New() verbs.Provider { return provider{} }

func (provider) Name() string { return "ibverbs" }

// Open returns the device serving addr: an IP address (with or without a
// port), an interface name, or "" / an unspecified IP for the first RDMA
// device. The netdev ↔ RDMA device mapping comes from sysfs via rdmamap,
// or, for iWARP devices, from RDMA netlink (nldev.go).
func (provider) Open(addr string) (verbs.Device, error) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	name, ip, err := findDevice(host)
	if err != nil {
		return nil, err
	}
	return openDevice(name, ip)
}

// findDevice maps a local IP or interface name to its RDMA device name;
// ip is the address to bind connections to (nil for "any").
func findDevice(host string) (name string, ip net.IP, err error) {
	devs := rdmamap.GetRdmaDeviceList()
	if len(devs) == 0 {
		return "", nil, fmt.Errorf("ibverbs: no RDMA devices (is a driver such as rdma_rxe loaded?)")
	}
	sort.Strings(devs)
	if host == "" {
		return devs[0], nil, nil
	}
	if ip = net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			return devs[0], nil, nil
		}
		ifname, err := interfaceOf(ip)
		if err != nil {
			return "", nil, err
		}
		if name, err = deviceForNetdev(ifname); err != nil {
			return "", nil, fmt.Errorf("ibverbs: %s (%s) has no RDMA device: %w", ifname, ip, err)
		}
		return name, ip, nil
	}
	// An interface name, or an RDMA device name given directly.
	if name, err = deviceForNetdev(host); err == nil {
		return name, firstIP(host), nil
	}
	for _, d := range devs {
		if d == host {
			return d, nil, nil
		}
	}
	return "", nil, fmt.Errorf("ibverbs: %q is neither a local IP nor an interface or RDMA device", host)
}

// deviceForNetdev is the RDMA device on netdev ifname: from the RoCE GID
// table (rdmamap; RoCE, and InfiniBand through IPoIB), else from RDMA
// netlink (iWARP devices such as siw, whose GID table names no netdev).
func deviceForNetdev(ifname string) (string, error) {
	name, err := rdmamap.GetRdmaDeviceForNetdevice(ifname)
	if err == nil {
		return name, nil
	}
	if n, nlErr := nldevDeviceFor(ifname); nlErr == nil {
		return n, nil
	}
	return "", err
}

func interfaceOf(ip net.IP) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return ifc.Name, nil
			}
		}
	}
	return "", fmt.Errorf("ibverbs: no local interface has address %s", ip)
}

// firstIP is the interface's first IPv4 address (else its first address).
func firstIP(ifname string) net.IP {
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil
	}
	addrs, _ := ifc.Addrs()
	var first net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if n.IP.To4() != nil {
				return n.IP
			}
			if first == nil && !n.IP.IsLinkLocalUnicast() {
				first = n.IP
			}
		}
	}
	return first
}

// ListDevices describes every RDMA device of the host with its netdevs,
// for `rdmagw devices`.
func ListDevices() ([]verbs.DeviceInfo, error) {
	devs := rdmamap.GetRdmaDeviceList()
	sort.Strings(devs)
	netdevs := map[string][]string{}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifs {
		if d, err := rdmamap.GetRdmaDeviceForNetdevice(ifc.Name); err == nil {
			netdevs[d] = append(netdevs[d], ifc.Name)
		}
	}
	// Devices without a RoCE GID table (iWARP): their ports' netdevs,
	// those of this network namespace, from RDMA netlink.
	if nl, err := nldevNetdevs(); err == nil {
		for d, nds := range nl {
			if len(netdevs[d]) > 0 {
				continue
			}
			for _, nd := range nds {
				if _, err := net.InterfaceByName(nd); err == nil {
					netdevs[d] = append(netdevs[d], nd)
				}
			}
		}
	}
	out := make([]verbs.DeviceInfo, 0, len(devs))
	for _, d := range devs {
		out = append(out, verbs.DeviceInfo{Name: d, Provider: "ibverbs", Netdevs: netdevs[d], Transport: transportOf(d)})
	}
	return out, nil
}

// transportOf reads the device's node type and link layer from sysfs.
func transportOf(dev string) string {
	base := "/sys/class/infiniband/" + dev
	if b, err := os.ReadFile(base + "/node_type"); err == nil && strings.Contains(string(b), "RNIC") {
		return "iWARP"
	}
	if b, err := os.ReadFile(base + "/ports/1/link_layer"); err == nil && strings.TrimSpace(string(b)) == "Ethernet" {
		return "RoCE"
	}
	return "InfiniBand"
}

func cString(s string) (*C.char, func()) {
	p := C.CString(s)
	return p, func() { C.free(unsafe.Pointer(p)) }
}
