//go:build ibverbs && cgo

package ibverbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"sync"

	"github.com/rdmagw/rdmagw/verbs"
)

// device is one RDMA device as librdmacm sees it: its verbs context (shared
// by every rdma_cm id on the device, so PDs, CQs and QPs are created on it)
// and an rdma_cm event channel of its own.
type device struct {
	name string
	ip   net.IP // local address connections bind to; nil for any
	ctx  *C.struct_ibv_context
	caps caps
	ev   *eventLoop
	info verbs.DeviceInfo

	closeOnce sync.Once
}

// caps are the device limits the provider clamps requests to.
type caps struct {
	maxQPWR, maxSGE, maxCQE, maxSRQWR, maxSRQSGE int
	// maxSGERd: SGEs an RDMA Read may scatter into (siw: 1; posting
	// more makes siw place the whole response at the first SGE).
	maxSGERd                 int
	maxRdAtom, maxInitRdAtom int
	// softRoCE: the device is rxe, whose responder reports a receive
	// too small for the message as "local QP operation error".
	softRoCE bool
}

// rxeVendorID is the vendor id soft-RoCE reports (RXE_VENDOR_ID).
const rxeVendorID = 0xffffff

func openDevice(name string, ip net.IP) (*device, error) {
	cname, free := cString(name)
	defer free()
	var attr C.struct_ibv_device_attr
	ctx := C.gw_device_context(cname, &attr)
	if ctx == nil {
		return nil, fmt.Errorf("ibverbs: librdmacm has no device %q", name)
	}
	ev, err := newEventLoop()
	if err != nil {
		return nil, err
	}
	d := &device{name: name, ip: ip, ctx: ctx, ev: ev, caps: caps{
		maxQPWR: int(attr.max_qp_wr), maxSGE: int(attr.max_sge), maxCQE: int(attr.max_cqe),
		maxSRQWR: int(attr.max_srq_wr), maxSRQSGE: int(attr.max_srq_sge), maxSGERd: int(attr.max_sge_rd),
		maxRdAtom: int(attr.max_qp_rd_atom), maxInitRdAtom: int(attr.max_qp_init_rd_atom),
		softRoCE: attr.vendor_id == rxeVendorID,
	}}
	d.info = verbs.DeviceInfo{Name: name, Provider: "ibverbs", Transport: transportOf(name)}
	if infos, err := ListDevices(); err == nil {
		for _, i := range infos {
			if i.Name == name {
				d.info.Netdevs = i.Netdevs
			}
		}
	}
	return d, nil
}

func (d *device) Info() verbs.DeviceInfo { return d.info }

// Close stops the device's event loop. Connections, listeners, CQs and PDs
// must be closed first (the device's context itself belongs to librdmacm
// and stays open for the process).
func (d *device) Close() error {
	d.closeOnce.Do(d.ev.close)
	return nil
}

func (d *device) CreateCQ(depth int) (verbs.CQ, error) { return newCQ(d, depth) }

func (d *device) AllocPD() (verbs.PD, error) { return newPD(d) }

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }
