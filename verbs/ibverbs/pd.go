//go:build ibverbs && cgo

package ibverbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

// pd is a protection domain plus the index of its regions by key, used to
// check local SGEs at post time and to find the region a peer's Send with
// Invalidate named.
type pd struct {
	dev *device
	pd  *C.struct_ibv_pd

	mu     sync.RWMutex
	byLKey map[uint32]*mr
	byRKey map[uint32]*mr
}

func newPD(d *device) (*pd, error) {
	p, err := C.ibv_alloc_pd(d.ctx)
	if p == nil {
		return nil, wrap("ibv_alloc_pd", err)
	}
	return &pd{dev: d, pd: p, byLKey: map[uint32]*mr{}, byRKey: map[uint32]*mr{}}, nil
}

func (p *pd) Close() error {
	if rc := C.ibv_dealloc_pd(p.pd); rc != 0 {
		return fmt.Errorf("ibverbs: ibv_dealloc_pd: %w", errno(rc))
	}
	return nil
}

// checkSGE reports whether s lies inside a region of this PD registered
// under s.LKey, with local write access when the device will write it.
// Zero-length entries are dropped before posting and always pass.
func (p *pd) checkSGE(s verbs.SGE, write bool) error {
	if len(s.Buf) == 0 {
		return nil
	}
	p.mu.RLock()
	m := p.byLKey[s.LKey]
	p.mu.RUnlock()
	if m == nil {
		return fmt.Errorf("%w: lkey %#x is not a region of this PD", verbs.ErrInvalidSGE, s.LKey)
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s.Buf)))
	if start < m.base || start+uintptr(len(s.Buf)) > m.base+uintptr(len(m.buf)) {
		return fmt.Errorf("%w: %d bytes at %#x outside region [%#x, +%d)", verbs.ErrInvalidSGE, len(s.Buf), start, m.base, len(m.buf))
	}
	if write && m.access&verbs.AccessLocalWrite == 0 {
		return fmt.Errorf("%w: region %#x has no local write access", verbs.ErrInvalidSGE, s.LKey)
	}
	return nil
}

// remoteInvalidated retires the region whose rkey a peer invalidated with
// Send with Invalidate.
func (p *pd) remoteInvalidated(rkey uint32) {
	p.mu.RLock()
	m := p.byRKey[rkey]
	p.mu.RUnlock()
	if m != nil {
		_ = m.Invalidate()
	}
}

func (p *pd) CreateSRQ(depth int) (verbs.SRQ, error) { return newSRQ(p, depth) }
