//go:build ibverbs && cgo

package ibverbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

// sendQueue is the Go side of a send queue: a ring of the caller's ids
// indexed by sequence number, and C memory for a full queue of work
// requests (slot seq % size), allocated once. Slots free up when a
// completion arrives for a later or equal sequence number (completions on
// one send queue are in order). Who posts, and the locking: post.go.
type sendQueue struct {
	mu      sync.Mutex
	size    int
	maxSGE  int
	ring    []sendSlot
	head    uint64 // next sequence number
	sent    uint64 // first sequence number not yet given to the device
	tail    uint64 // first sequence number not known complete
	wrs     *C.struct_gw_swr
	sges    *C.struct_ibv_sge
	scratch *C.struct_ibv_send_wr
	posted  *C.int // C memory: a Go variable passed to C would escape to the heap

	postMu sync.Mutex    // held around ibv_post_send
	kick   chan struct{} // wakes the poster; nil until it starts
	quit   chan struct{} // closed to stop the poster
	failed error         // a post on the poster failed: PostSend fails with it
}

type sendSlot struct {
	id uint64
	op verbs.Opcode
}

func (q *sendQueue) init(size, maxSGE int) {
	q.size, q.maxSGE, q.ring = size, maxSGE, make([]sendSlot, size)
	q.wrs = (*C.struct_gw_swr)(calloc(size, unsafe.Sizeof(C.struct_gw_swr{})))
	q.sges = (*C.struct_ibv_sge)(calloc(size*maxSGE, unsafe.Sizeof(C.struct_ibv_sge{})))
	q.scratch = (*C.struct_ibv_send_wr)(calloc(size, unsafe.Sizeof(C.struct_ibv_send_wr{})))
	q.posted = (*C.int)(calloc(1, unsafe.Sizeof(C.int(0))))
}

// completed returns the caller's id and opcode of sequence seq and frees
// every slot up to it.
func (q *sendQueue) completed(seq uint64) (uint64, verbs.Opcode) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ring == nil {
		return seq, verbs.OpSend
	}
	s := q.ring[seq%uint64(q.size)]
	if seq >= q.tail {
		q.tail = seq + 1
	}
	return s.id, s.op
}

func (q *sendQueue) free() {
	C.free(unsafe.Pointer(q.wrs))
	C.free(unsafe.Pointer(q.sges))
	C.free(unsafe.Pointer(q.scratch))
	C.free(unsafe.Pointer(q.posted))
	q.wrs, q.sges, q.scratch, q.posted, q.ring = nil, nil, nil, nil, nil
}

// recvQueue is the same for a QP's own receive queue, where every
// receive completes (in order) on its own.
type recvQueue struct {
	mu      sync.Mutex
	size    int
	maxSGE  int
	ring    []uint64
	head    uint64
	tail    uint64
	wrs     *C.struct_gw_rwr
	sges    *C.struct_ibv_sge
	scratch *C.struct_ibv_recv_wr
	posted  *C.int
}

func (q *recvQueue) init(size, maxSGE int) {
	q.size, q.maxSGE, q.ring = size, maxSGE, make([]uint64, size)
	q.wrs = (*C.struct_gw_rwr)(calloc(size, unsafe.Sizeof(C.struct_gw_rwr{})))
	q.sges = (*C.struct_ibv_sge)(calloc(size*maxSGE, unsafe.Sizeof(C.struct_ibv_sge{})))
	q.scratch = (*C.struct_ibv_recv_wr)(calloc(size, unsafe.Sizeof(C.struct_ibv_recv_wr{})))
	q.posted = (*C.int)(calloc(1, unsafe.Sizeof(C.int(0))))
}

func (q *recvQueue) completed(seq uint64) uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ring == nil {
		return seq
	}
	if seq >= q.tail {
		q.tail = seq + 1
	}
	return q.ring[seq%uint64(q.size)]
}

func (q *recvQueue) free() {
	C.free(unsafe.Pointer(q.wrs))
	C.free(unsafe.Pointer(q.sges))
	C.free(unsafe.Pointer(q.scratch))
	C.free(unsafe.Pointer(q.posted))
	q.wrs, q.sges, q.scratch, q.posted, q.ring = nil, nil, nil, nil, nil
}

func calloc(n int, size uintptr) unsafe.Pointer {
	return C.calloc(C.size_t(max(n, 1)), C.size_t(size))
}
