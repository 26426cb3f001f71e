//go:build ibverbs && cgo

package ibverbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cmEvent is a copied (and already acknowledged) rdma_cm event.
type cmEvent struct {
	typ     C.int
	status  int
	id      *C.struct_rdma_cm_id
	private []byte
	// The peer's RDMA Read depths, from a connect request or reply.
	initiatorDepth, responderResources int
	consumerReject                     bool
}

func (e *cmEvent) String() string {
	return fmt.Sprintf("%s (status %d)", C.GoString(C.rdma_event_str(uint32(e.typ))), e.status)
}

// cmHandler receives the events of one rdma_cm id. It runs on the event
// loop's goroutine and must not block.
type cmHandler interface{ cmEvent(ev *cmEvent) }

// eventLoop services one rdma_cm event channel. The channel's fd is
// non-blocking and parked in the Go runtime's netpoller: one goroutine per
// device, and no OS thread waits inside rdma_get_cm_event. Each id's
// context holds a token (never a pointer, never reused) naming its handler.
type eventLoop struct {
	ch   *C.struct_rdma_event_channel
	file *os.File // a dup of the channel's fd, registered with the netpoller
	raw  syscall.RawConn
	done chan struct{}

	mu       sync.Mutex
	handlers map[uint64]cmHandler
	next     uint64
}

func newEventLoop() (*eventLoop, error) {
	ch, err := C.rdma_create_event_channel()
	if ch == nil {
		return nil, fmt.Errorf("ibverbs: rdma_create_event_channel: %w", err)
	}
	file, err := pollable(int(ch.fd), "rdma_cm")
	if err != nil {
		C.rdma_destroy_event_channel(ch)
		return nil, err
	}
	raw, err := file.SyscallConn()
	if err != nil {
		file.Close()
		C.rdma_destroy_event_channel(ch)
		return nil, err
	}
	l := &eventLoop{ch: ch, file: file, raw: raw, done: make(chan struct{}), handlers: map[uint64]cmHandler{}}
	go l.run()
	return l, nil
}

// pollable makes fd non-blocking and returns an *os.File over a duplicate
// of it, which the runtime registers with its poller. The duplicate is
// closed with the File; the original stays with its library.
func pollable(fd int, name string) (*os.File, error) {
	if rc, err := C.gw_set_nonblock(C.int(fd)); rc != 0 {
		return nil, fmt.Errorf("ibverbs: %s fd non-blocking: %w", name, err)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("ibverbs: dup %s fd: %w", name, err)
	}
	return os.NewFile(uintptr(dup), name), nil
}

func (l *eventLoop) run() {
	defer close(l.done)
	for {
		err := l.raw.Read(func(uintptr) bool {
			for {
				var e C.struct_gw_event
				if rc, err := C.gw_get_event(l.ch, &e); rc != 0 {
					// EAGAIN: park until the fd is readable again.
					return !errors.Is(err, syscall.EAGAIN)
				}
				l.dispatch(&e)
			}
		})
		if err != nil {
			return // the File was closed
		}
	}
}

func (l *eventLoop) dispatch(e *C.struct_gw_event) {
	ev := &cmEvent{
		typ: C.int(e._type), status: int(e.status), id: e.id,
		initiatorDepth: int(e.initiator_depth), responderResources: int(e.responder_resources),
		consumerReject: e.consumer_reject != 0,
	}
	if e.private_len > 0 {
		ev.private = C.GoBytes(unsafe.Pointer(&e.private_data[0]), C.int(e.private_len))
	}
	l.mu.Lock()
	h := l.handlers[uint64(e.token)]
	l.mu.Unlock()
	if ev.typ == C.RDMA_CM_EVENT_CONNECT_REQUEST {
		if ln, ok := h.(*listener); ok {
			ln.request(ev)
			return
		}
		// No listener any more: refuse and drop the new id.
		C.rdma_reject(ev.id, nil, 0)
		C.rdma_destroy_id(ev.id)
		return
	}
	if h != nil {
		h.cmEvent(ev)
	}
}

// register names h by a fresh token.
func (l *eventLoop) register(h cmHandler) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	l.handlers[l.next] = h
	return l.next
}

func (l *eventLoop) unregister(token uint64) {
	l.mu.Lock()
	delete(l.handlers, token)
	l.mu.Unlock()
}

// createID creates an RDMA_PS_TCP id on this channel carrying token.
func (l *eventLoop) createID(token uint64) (*C.struct_rdma_cm_id, error) {
	var id *C.struct_rdma_cm_id
	if rc, err := C.rdma_create_id(l.ch, &id, nil, C.RDMA_PS_TCP); rc != 0 {
		return nil, fmt.Errorf("ibverbs: rdma_create_id: %w", err)
	}
	C.gw_set_token(id, C.uint64_t(token))
	return id, nil
}

// close stops the loop and destroys the channel; every id on it must have
// been destroyed.
func (l *eventLoop) close() {
	l.file.Close()
	<-l.done
	C.rdma_destroy_event_channel(l.ch)
}
