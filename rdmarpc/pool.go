package rdmarpc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/verbs"
)

// ErrPoolExhausted is returned by Pool.Get when the pool is at its byte
// limit: the caller back-pressures (stops reading its source) and retries
// after a Release.
var ErrPoolExhausted = errors.New("rdmarpc: registered buffer pool exhausted")

// ErrQuotaExhausted is returned by Pool.GetQuota when the Quota (or one of
// its parents) is used up. It wraps ErrPoolExhausted: for the caller it
// means the same, wait for a Release.
var ErrQuotaExhausted = fmt.Errorf("%w: share used up", ErrPoolExhausted)

// Quota is a ceiling on the pool bytes one user (a connection, or all
// connections together through a parent) may hold at once. Buffers taken
// with Pool.GetQuota count against it and its parents until released. A
// quota with nothing in use admits one buffer whatever its size, so a
// ceiling below the largest buffer slows a user down but never stops it.
// A nil *Quota admits everything.
type Quota struct {
	limit  int64
	used   atomic.Int64
	parent *Quota
}

// NewQuota returns a quota of limit bytes (<= 0: no limit of its own)
// inside parent (nil: none).
func NewQuota(limit int64, parent *Quota) *Quota {
	return &Quota{limit: limit, parent: parent}
}

// Used is the bytes held under q now.
func (q *Quota) Used() int64 { return q.used.Load() }

// Limit is q's own ceiling (<= 0: none).
func (q *Quota) Limit() int64 { return q.limit }

// take charges n bytes to q and its parents, or to none of them.
func (q *Quota) take(n int64) bool {
	if q == nil {
		return true
	}
	u := q.used.Add(n)
	if q.limit > 0 && u > q.limit && u != n {
		q.used.Add(-n)
		return false
	}
	if !q.parent.take(n) {
		q.used.Add(-n)
		return false
	}
	return true
}

func (q *Quota) give(n int64) {
	for ; q != nil; q = q.parent {
		q.used.Add(-n)
	}
}

// Buffer is one registered buffer of a Pool. Bytes is the whole buffer;
// users slice it. A Buffer goes back to its pool with Release.
type Buffer struct {
	Bytes []byte
	mr    verbs.MR
	pool  *Pool
	class int
	slab  int // index in pool.slabs (PoolDomain keys)
	refs  atomic.Int32
	quota *Quota // charged with cap(Bytes) while the buffer is out
}

// LKey names the buffer's region in local scatter/gather entries.
func (b *Buffer) LKey() uint32 { return b.mr.LKey() }

// SGE returns the scatter/gather entry for b.Bytes[off:off+n].
func (b *Buffer) SGE(off, n int) verbs.SGE {
	return verbs.SGE{Buf: b.Bytes[off : off+n], LKey: b.mr.LKey()}
}

// Ref adds a reference: the buffer returns to the pool when every holder
// has released it (a READ payload is held by the gateway until it has
// been received and by the engine until its RDMA Write completed).
func (b *Buffer) Ref() { b.refs.Add(1) }

// Release drops a reference and returns the buffer to its pool at zero.
func (b *Buffer) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		b.pool.put(b)
	case n < 0:
		panic("rdmarpc: Buffer released twice")
	}
}

// PoolConfig sizes a Pool.
type PoolConfig struct {
	// MaxBytes bounds the registered memory the pool may hold in all.
	MaxBytes int
	// Classes are the buffer sizes, ascending (default 4 KiB, 64 KiB,
	// 1 MiB + 4 KiB: the last holds a 1 MiB NFS READ/WRITE payload).
	Classes []int
	// SlabBytes is how much memory is mapped and registered at a time for
	// one class (default 4 MiB, at least one buffer).
	SlabBytes int
	// Access is the registration's access (default local write only: a
	// responder never exposes its memory).
	Access verbs.Access
}

// DefaultClasses are the buffer sizes of a pool without configuration.
var DefaultClasses = []int{4 << 10, 64 << 10, 1<<20 + 4<<10}

// Pool hands out registered buffers in a few size classes. Memory is
// mapped and registered a slab at a time as demand grows, up to MaxBytes,
// and is never returned to the system until Close: steady state allocates
// nothing and registers nothing.
type Pool struct {
	pd     verbs.PD
	cfg    PoolConfig
	mu     sync.Mutex
	free   [][]*Buffer // per class
	slabs  []poolSlab
	mapped int
	inUse  atomic.Int64 // bytes handed out
	closed bool
	// domains: other PDs the slabs are registered in (pool_domain.go).
	domains []*PoolDomain
}

type poolSlab struct {
	mem  *verbs.Memory
	mr   verbs.MR
	size int // bytes of mem in use (and registered)
}

// NewPool creates a pool registering its memory on pd.
func NewPool(pd verbs.PD, cfg PoolConfig) (*Pool, error) {
	if len(cfg.Classes) == 0 {
		cfg.Classes = DefaultClasses
	}
	for i := 1; i < len(cfg.Classes); i++ {
		if cfg.Classes[i] <= cfg.Classes[i-1] {
			return nil, fmt.Errorf("rdmarpc: pool classes must ascend: %v", cfg.Classes)
		}
	}
	if cfg.SlabBytes <= 0 {
		cfg.SlabBytes = 4 << 20
	}
	if cfg.Access == 0 {
		cfg.Access = verbs.AccessLocalWrite
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 256 << 20
	}
	return &Pool{pd: pd, cfg: cfg, free: make([][]*Buffer, len(cfg.Classes))}, nil
}

// MaxSize is the largest buffer the pool hands out.
func (p *Pool) MaxSize() int { return p.cfg.Classes[len(p.cfg.Classes)-1] }

// MaxBytes is the most registered memory the pool will map.
func (p *Pool) MaxBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg.MaxBytes
}

// RaiseMax lets the pool map up to n bytes in all, if that is more than
// it may now (a pool never gives back what it mapped, so the ceiling only
// rises).
func (p *Pool) RaiseMax(n int) {
	p.mu.Lock()
	p.cfg.MaxBytes = max(p.cfg.MaxBytes, n)
	p.mu.Unlock()
}

// InUse is the number of bytes of buffers handed out and not released.
func (p *Pool) InUse() int64 { return p.inUse.Load() }

// Mapped is the number of bytes mapped and registered.
func (p *Pool) Mapped() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mapped
}

// Get returns a buffer of at least n bytes with one reference, whose Bytes
// is sliced to exactly n.
func (p *Pool) Get(n int) (*Buffer, error) { return p.GetQuota(n, nil) }

// GetQuota is Get with the buffer charged to q (and its parents) until it
// is released; ErrQuotaExhausted when q has no room for it.
func (p *Pool) GetQuota(n int, q *Quota) (*Buffer, error) {
	c := -1
	for i, size := range p.cfg.Classes {
		if n <= size {
			c = i
			break
		}
	}
	if c < 0 {
		return nil, fmt.Errorf("rdmarpc: buffer of %d bytes exceeds the largest pool class (%d)", n, p.MaxSize())
	}
	size := int64(p.cfg.Classes[c])
	if !q.take(size) {
		return nil, ErrQuotaExhausted
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		q.give(size)
		return nil, verbs.ErrClosed
	}
	if len(p.free[c]) == 0 {
		if err := p.grow(c); err != nil {
			p.mu.Unlock()
			q.give(size)
			return nil, err
		}
	}
	fl := p.free[c]
	b := fl[len(fl)-1]
	p.free[c] = fl[:len(fl)-1]
	p.mu.Unlock()
	b.refs.Store(1)
	b.quota = q
	b.Bytes = b.Bytes[:n]
	p.inUse.Add(int64(cap(b.Bytes)))
	return b, nil
}

// grow maps and registers one slab for class c. Called with p.mu held.
func (p *Pool) grow(c int) error {
	size := p.cfg.Classes[c]
	slab := p.cfg.SlabBytes
	if slab < size {
		slab = size
	}
	slab -= slab % size
	if p.mapped+slab > p.cfg.MaxBytes {
		slab = (p.cfg.MaxBytes - p.mapped) / size * size
		if slab == 0 {
			return ErrPoolExhausted
		}
	}
	mem, err := verbs.Alloc(slab)
	if err != nil {
		return err
	}
	mr, err := p.pd.Register(mem.Bytes(), p.cfg.Access)
	if err != nil {
		mem.Free()
		return fmt.Errorf("rdmarpc: register pool slab of %d bytes: %w", slab, err)
	}
	if err := p.registerSlabLocked(mem.Bytes()[:slab]); err != nil {
		mr.Deregister()
		mem.Free()
		return err
	}
	idx := len(p.slabs)
	p.slabs = append(p.slabs, poolSlab{mem: mem, mr: mr, size: slab})
	p.mapped += slab
	all := mem.Bytes()[:slab]
	for off := 0; off+size <= len(all); off += size {
		p.free[c] = append(p.free[c], &Buffer{Bytes: all[off : off+size : off+size], mr: mr, pool: p, class: c, slab: idx})
	}
	return nil
}

func (p *Pool) put(b *Buffer) {
	b.Bytes = b.Bytes[:cap(b.Bytes)]
	p.inUse.Add(-int64(cap(b.Bytes)))
	b.quota.give(int64(cap(b.Bytes)))
	b.quota = nil
	p.mu.Lock()
	p.free[b.class] = append(p.free[b.class], b)
	p.mu.Unlock()
}

// Close deregisters and unmaps every slab. Buffers still out become
// invalid; close the pool only after every user has stopped.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var first error
	for _, d := range p.domains {
		if err := d.deregisterLocked(); err != nil && first == nil {
			first = err
		}
	}
	p.domains = nil
	for _, s := range p.slabs {
		if err := s.mr.Deregister(); err != nil && first == nil {
			first = err
		}
		if err := s.mem.Free(); err != nil && first == nil {
			first = err
		}
	}
	p.slabs = nil
	return first
}
