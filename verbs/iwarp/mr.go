package iwarp

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rdmagw/rdmagw/verbs"
)

// STags (RFC 5040 section 2.1) name memory regions to peers. Like a real
// RNIC's, ours are an index into the device's region table and an 8-bit
// key:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|              STag index (24 bits)             |  Key (8 bits) |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A table slot's key is incremented each time the slot is reused, so an
// STag of a deregistered region does not name its successor. The lkey and
// the rkey of a region are the same STag; the rkey is 0 when the region
// grants no remote access. Tagged offsets are virtual addresses (MR.Addr
// is the address of Bytes()[0]).
//
// Each slot keeps its *mr for good: Deregister puts the slot (and with it
// the object) on the device's free list and Register takes it back with
// the next key, so registering in steady state allocates nothing (the
// requester registers per RPC). The consequence for users: an MR must not
// be used after Deregister returned, as with ibv_dereg_mr; its object may
// already stand for a later registration. Inside the provider, whoever
// finds a region by STag checks under m.use that it is still live with
// that STag (acquire, txState.holdMR): the object may have been retired
// and reused in between.

const maxMRIndex = 1<<24 - 1

type device struct {
	cfg  Config
	info verbs.DeviceInfo
	// local is the IP the device was opened on, the source address of
	// the connections it dials (nil: any).
	local net.IP

	mu     sync.RWMutex
	mrs    []*mr   // by STag index: the live region or nil; slot 0 unused so no STag is 0
	objs   []*mr   // by STag index: the slot's object, live or not
	keys   []uint8 // last key handed out per slot
	free   []uint32
	closed bool
}

func (d *device) Info() verbs.DeviceInfo { return d.info }

func (d *device) AllocPD() (verbs.PD, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return nil, verbs.ErrClosed
	}
	return &pd{dev: d}, nil
}

func (d *device) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return nil
}

// lookup returns the region an STag names if it is live now, or nil. The
// region may be deregistered (and its object reused) as soon as lookup
// returns: check m.stag and m.dead under m.use before trusting any field.
func (d *device) lookup(stag uint32) *mr {
	idx := stag >> 8
	d.mu.RLock()
	var m *mr
	if int(idx) < len(d.mrs) {
		m = d.mrs[idx]
	}
	if m != nil && m.stag != stag {
		m = nil
	}
	d.mu.RUnlock()
	return m
}

// acquire returns the live region stag names, read-locked (m.use) so it
// cannot be deregistered or reused until the caller's RUnlock; nil if
// there is none.
func (d *device) acquire(stag uint32) *mr {
	m := d.lookup(stag)
	if m == nil {
		return nil
	}
	m.use.RLock()
	if m.dead || m.stag != stag {
		m.use.RUnlock()
		return nil
	}
	return m
}

type pd struct {
	dev    *device
	closed atomic.Bool
}

func (p *pd) Close() error { p.closed.Store(true); return nil }

func (p *pd) CreateSRQ(depth int) (verbs.SRQ, error) {
	if p.closed.Load() {
		return nil, verbs.ErrClosed
	}
	if depth <= 0 {
		return nil, fmt.Errorf("iwarp: SRQ depth %d", depth)
	}
	return &srq{pd: p, q: newRecvQueue(depth, defaultMaxSGE)}, nil
}

func (p *pd) Register(buf []byte, access verbs.Access) (verbs.MR, error) {
	if p.closed.Load() {
		return nil, verbs.ErrClosed
	}
	if len(buf) == 0 {
		return nil, errors.New("iwarp: register of an empty buffer")
	}
	d := p.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, verbs.ErrClosed
	}
	var idx uint32
	var m *mr
	if n := len(d.free); n > 0 {
		idx = d.free[n-1]
		d.free = d.free[:n-1]
		m = d.objs[idx]
	} else {
		if len(d.mrs) > maxMRIndex {
			return nil, fmt.Errorf("iwarp: out of STags (%d regions)", maxMRIndex)
		}
		idx = uint32(len(d.mrs))
		m = &mr{dead: true}
		d.mrs = append(d.mrs, nil)
		d.objs = append(d.objs, m)
		d.keys = append(d.keys, 0)
	}
	d.keys[idx]++
	// The object is retired: nobody holds m.use for long (a reader that
	// takes it sees dead or another STag and lets go at once). Fields are
	// written under both d.mu and m.use, so readers holding either see
	// them whole.
	m.use.Lock()
	m.pd, m.b, m.access, m.stag = p, buf, access, idx<<8|uint32(d.keys[idx])
	m.addr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	m.remote.Store(access&(verbs.AccessRemoteRead|verbs.AccessRemoteWrite) != 0)
	m.dead = false
	m.use.Unlock()
	d.mrs[idx] = m
	return m, nil
}

type mr struct {
	pd     *pd
	b      []byte
	addr   uint64
	stag   uint32
	access verbs.Access
	remote atomic.Bool // the rkey is valid
	// use is held shared while data is placed into or sent from the
	// region, so Deregister cannot pull memory from under a transfer (nor
	// Register reuse the object).
	use  sync.RWMutex
	dead bool // not registered (guarded by use)
}

func (m *mr) Bytes() []byte { return m.b }
func (m *mr) LKey() uint32  { return m.stag }
func (m *mr) Addr() uint64  { return m.addr }
func (m *mr) Valid() bool   { return m.remote.Load() }

func (m *mr) RKey() uint32 {
	if m.access&(verbs.AccessRemoteRead|verbs.AccessRemoteWrite) == 0 {
		return 0
	}
	return m.stag
}

func (m *mr) Invalidate() error { m.remote.Store(false); return nil }

func (m *mr) Deregister() error {
	m.remote.Store(false)
	m.use.Lock()
	if m.dead {
		m.use.Unlock()
		return nil
	}
	m.dead = true
	d := m.pd.dev
	idx := m.stag >> 8
	m.use.Unlock()
	// Only after dead is set may the slot (and the object) be reused.
	d.mu.Lock()
	if d.mrs[idx] == m {
		d.mrs[idx] = nil
		d.free = append(d.free, idx)
	}
	d.mu.Unlock()
	return nil
}

// slice returns the region bytes for [to, to+n) in tagged-offset terms, or
// the Terminate error code (DDP tagged codes) that rejects the access.
func (m *mr) rangeCheck(to uint64, n int) (off int, code uint8, ok bool) {
	end := to + uint64(n)
	if end < to {
		return 0, DDPTaggedTOWrap, false
	}
	if to < m.addr || end > m.addr+uint64(len(m.b)) {
		return 0, DDPTaggedBaseBounds, false
	}
	return int(to - m.addr), 0, true
}

// checkSGE validates a local scatter/gather element against its lkey.
func (p *pd) checkSGE(s *verbs.SGE, needWrite bool) bool {
	if len(s.Buf) == 0 {
		return true
	}
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(s.Buf))))
	d := p.dev
	idx := s.LKey >> 8
	// Under d.mu the fields of a live region are stable (Register writes
	// them under it).
	d.mu.RLock()
	var m *mr
	if int(idx) < len(d.mrs) {
		m = d.mrs[idx]
	}
	ok := m != nil && m.stag == s.LKey && m.pd == p &&
		(!needWrite || m.access&verbs.AccessLocalWrite != 0) &&
		start >= m.addr && start+uint64(len(s.Buf)) <= m.addr+uint64(len(m.b))
	d.mu.RUnlock()
	return ok
}
