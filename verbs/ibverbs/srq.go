//go:build ibverbs && cgo

package ibverbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

// srq is a shared receive queue. Its receives complete out of order (on
// many QPs), so the caller's ids live in slots with a free list; wr_id
// carries the SRQ's process-wide number and the slot.
type srq struct {
	pd     *pd
	srq    *C.struct_ibv_srq
	num    uint32
	maxSGE int

	mu      sync.Mutex
	ids     []uint64
	free    []uint32
	closed  bool
	wrs     *C.struct_gw_rwr
	sges    *C.struct_ibv_sge
	scratch *C.struct_ibv_recv_wr
	posted  *C.int
}

var (
	srqsMu  sync.RWMutex
	srqs    = map[uint32]*srq{}
	srqNext atomic.Uint32
)

func lookupSRQ(num uint32) *srq {
	srqsMu.RLock()
	defer srqsMu.RUnlock()
	return srqs[num]
}

const srqMaxSGE = 4

func newSRQ(p *pd, depth int) (*srq, error) {
	if depth <= 0 || depth > p.dev.caps.maxSRQWR {
		return nil, fmt.Errorf("ibverbs: CreateSRQ(%d): depth must be 1..%d", depth, p.dev.caps.maxSRQWR)
	}
	maxSGE := min(srqMaxSGE, p.dev.caps.maxSRQSGE)
	var attr C.struct_ibv_srq_init_attr
	attr.attr.max_wr = C.uint32_t(depth)
	attr.attr.max_sge = C.uint32_t(maxSGE)
	h, err := C.ibv_create_srq(p.pd, &attr)
	if h == nil {
		return nil, wrap(fmt.Sprintf("ibv_create_srq(%d)", depth), err)
	}
	s := &srq{pd: p, srq: h, num: srqNext.Add(1), maxSGE: maxSGE, ids: make([]uint64, depth), free: make([]uint32, depth)}
	for i := range s.free {
		s.free[i] = uint32(depth - 1 - i)
	}
	s.wrs = (*C.struct_gw_rwr)(calloc(depth, unsafe.Sizeof(C.struct_gw_rwr{})))
	s.sges = (*C.struct_ibv_sge)(calloc(depth*maxSGE, unsafe.Sizeof(C.struct_ibv_sge{})))
	s.scratch = (*C.struct_ibv_recv_wr)(calloc(depth, unsafe.Sizeof(C.struct_ibv_recv_wr{})))
	s.posted = (*C.int)(calloc(1, unsafe.Sizeof(C.int(0))))
	srqsMu.Lock()
	srqs[s.num] = s
	srqsMu.Unlock()
	return s, nil
}

func (s *srq) PostRecv(wr *verbs.RecvWR) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return verbs.ErrClosed
	}
	n := 0
	for w := wr; w != nil; w = w.Next {
		n++
	}
	if n > len(s.free) {
		return verbs.ErrQueueFull
	}
	ws := unsafe.Slice(s.wrs, len(s.ids))
	sges := unsafe.Slice(s.sges, len(s.ids)*s.maxSGE)
	top := len(s.free)
	i, off := 0, 0
	for w := wr; w != nil; w = w.Next {
		if len(w.SGL) > s.maxSGE {
			return fmt.Errorf("%w: %d SGEs in one receive, the SRQ takes %d", verbs.ErrInvalidSGE, len(w.SGL), s.maxSGE)
		}
		k, _, err := fillSGEs(s.pd, sges[off:], w.SGL, true)
		if err != nil {
			return err
		}
		slot := s.free[top-1-i]
		s.ids[slot] = w.ID
		ws[i] = C.struct_gw_rwr{wr_id: C.uint64_t(tagSRQ<<tagShift | uint64(s.num)<<32 | uint64(slot)), sge_off: C.uint32_t(off), num_sge: C.uint32_t(k)}
		off += k
		i++
	}
	rc := C.gw_post_recv(nil, s.srq, s.scratch, s.wrs, s.sges, C.int(n), s.posted)
	s.free = s.free[:top-int(*s.posted)]
	if rc != 0 {
		return postErr("ibv_post_srq_recv", rc)
	}
	return nil
}

// completed returns the caller's id of a slot and frees the slot.
func (s *srq) completed(slot uint32) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if int(slot) >= len(s.ids) {
		return uint64(slot)
	}
	s.free = append(s.free, slot)
	return s.ids[slot]
}

// Close destroys the SRQ; connections using it must be closed first.
func (s *srq) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if rc := C.ibv_destroy_srq(s.srq); rc != 0 {
		return fmt.Errorf("ibverbs: ibv_destroy_srq: %w", errno(rc))
	}
	s.closed = true
	srqsMu.Lock()
	delete(srqs, s.num)
	srqsMu.Unlock()
	C.free(unsafe.Pointer(s.wrs))
	C.free(unsafe.Pointer(s.sges))
	C.free(unsafe.Pointer(s.scratch))
	C.free(unsafe.Pointer(s.posted))
	return nil
}
