//go:build ibverbs && cgo

package ibverbs

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

// mr is a registered region. A region with remote access is registered
// twice: local (whose lkey the caller uses) and remote (whose rkey peers
// use, with the remote rights). Invalidate deregisters the remote one, so
// the rkey dies at once while local use continues: ibv_reg_mr regions
// cannot be invalidated in place from user space on every device.
type mr struct {
	pd     *pd
	buf    []byte
	base   uintptr
	access verbs.Access
	lkey   uint32
	rkey   uint32

	mu     sync.Mutex
	local  *C.struct_ibv_mr
	remote *C.struct_ibv_mr
	valid  atomic.Bool
}

const remoteAccess = verbs.AccessRemoteRead | verbs.AccessRemoteWrite

func (p *pd) Register(buf []byte, access verbs.Access) (verbs.MR, error) {
	if len(buf) == 0 {
		return nil, errors.New("ibverbs: Register of an empty buffer")
	}
	addr := unsafe.Pointer(unsafe.SliceData(buf))
	var localFlags C.int
	if access&verbs.AccessLocalWrite != 0 {
		localFlags |= C.IBV_ACCESS_LOCAL_WRITE
	}
	local, err := C.gw_reg_mr(p.pd, addr, C.size_t(len(buf)), localFlags)
	if local == nil {
		return nil, wrap(fmt.Sprintf("ibv_reg_mr(%d bytes)", len(buf)), err)
	}
	m := &mr{pd: p, buf: buf, base: uintptr(addr), access: access, local: local, lkey: uint32(local.lkey)}
	if access&remoteAccess != 0 {
		// Remote write needs local write on the same registration.
		remoteFlags := C.int(C.IBV_ACCESS_LOCAL_WRITE)
		if access&verbs.AccessRemoteRead != 0 {
			remoteFlags |= C.IBV_ACCESS_REMOTE_READ
		}
		if access&verbs.AccessRemoteWrite != 0 {
			remoteFlags |= C.IBV_ACCESS_REMOTE_WRITE
		}
		remote, err := C.gw_reg_mr(p.pd, addr, C.size_t(len(buf)), remoteFlags)
		if remote == nil {
			C.ibv_dereg_mr(local)
			return nil, wrap(fmt.Sprintf("ibv_reg_mr(%d bytes, remote)", len(buf)), err)
		}
		m.remote, m.rkey = remote, uint32(remote.rkey)
		m.valid.Store(true)
	}
	p.mu.Lock()
	p.byLKey[m.lkey] = m
	if m.rkey != 0 {
		p.byRKey[m.rkey] = m
	}
	p.mu.Unlock()
	return m, nil
}

func (m *mr) Bytes() []byte { return m.buf }
func (m *mr) LKey() uint32  { return m.lkey }
func (m *mr) RKey() uint32  { return m.rkey }
func (m *mr) Addr() uint64  { return uint64(m.base) }
func (m *mr) Valid() bool   { return m.valid.Load() }

// Invalidate deregisters the remote registration: from the moment it
// returns the device refuses the rkey.
func (m *mr) Invalidate() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.valid.Store(false)
	if m.remote == nil {
		return nil
	}
	m.pd.mu.Lock()
	delete(m.pd.byRKey, m.rkey)
	m.pd.mu.Unlock()
	rc := C.ibv_dereg_mr(m.remote)
	m.remote = nil
	if rc != 0 {
		return fmt.Errorf("ibverbs: ibv_dereg_mr (remote): %w", errno(rc))
	}
	return nil
}

func (m *mr) Deregister() error {
	err := m.Invalidate()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.local == nil {
		return err
	}
	m.pd.mu.Lock()
	if m.pd.byLKey[m.lkey] == m {
		delete(m.pd.byLKey, m.lkey)
	}
	m.pd.mu.Unlock()
	if rc := C.ibv_dereg_mr(m.local); rc != 0 && err == nil {
		err = fmt.Errorf("ibverbs: ibv_dereg_mr: %w", errno(rc))
	}
	m.local = nil
	return err
}

// errno turns a verbs return code (an errno value, or -1 with errno set by
// older providers) into an error.
func errno(rc C.int) error {
	if rc < 0 {
		return syscall.Errno(-rc)
	}
	return syscall.Errno(rc)
}
