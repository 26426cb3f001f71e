package rdmarpc

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rdmagw/rdmagw/verbs"
)

// PoolDomain is a Pool's memory registered once more, local access only,
// in another protection domain, so a connection with a PD of its own can
// use the shared pool's buffers in its scatter/gather entries (an lkey
// names a region of one PD; a queue pair accepts only its own PD's).
// Every slab the pool has, and every slab it maps later, is registered in
// each attached domain before any of its buffers is handed out.
//
// One PD per connection is what RFC 8166 §8.1.1 asks of a requester: the
// rkeys a connection exposes for its RPCs then name memory only that
// connection's queue pair can reach, so a peer on another connection can
// neither RDMA Read, RDMA Write nor invalidate them.
type PoolDomain struct {
	pool *Pool
	pd   verbs.PD
	mrs  atomic.Pointer[[]verbs.MR] // per slab index; copied on growth
}

// Attach registers the pool's memory in pd and keeps registering new
// slabs there until the domain is closed.
func (p *Pool) Attach(pd verbs.PD) (*PoolDomain, error) {
	d := &PoolDomain{pool: p, pd: pd}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, verbs.ErrClosed
	}
	mrs := make([]verbs.MR, 0, len(p.slabs))
	for _, s := range p.slabs {
		mr, err := pd.Register(s.mem.Bytes()[:s.size], p.cfg.Access)
		if err != nil {
			for _, m := range mrs {
				m.Deregister()
			}
			return nil, fmt.Errorf("rdmarpc: register pool slab of %d bytes in a connection's PD: %w", s.size, err)
		}
		mrs = append(mrs, mr)
	}
	d.mrs.Store(&mrs)
	p.domains = append(p.domains, d)
	return d, nil
}

// PD is the protection domain the domain registers in.
func (d *PoolDomain) PD() verbs.PD { return d.pd }

// SGE is b.SGE(off, n) with the domain's key for b's memory.
func (d *PoolDomain) SGE(b *Buffer, off, n int) verbs.SGE {
	return verbs.SGE{Buf: b.Bytes[off : off+n], LKey: (*d.mrs.Load())[b.slab].LKey()}
}

// Close deregisters the domain's registrations and detaches it from the
// pool. Nothing may use its keys afterwards.
func (d *PoolDomain) Close() error {
	p := d.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.domains {
		if o == d {
			p.domains = append(p.domains[:i], p.domains[i+1:]...)
			break
		}
	}
	return d.deregisterLocked()
}

func (d *PoolDomain) deregisterLocked() error {
	mp := d.mrs.Swap(&[]verbs.MR{})
	if mp == nil {
		return nil
	}
	var errs []error
	for _, mr := range *mp {
		if err := mr.Deregister(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// registerSlabLocked registers a new slab (index len(p.slabs)) in every
// attached domain; on failure it undoes what it did. Called with p.mu held.
func (p *Pool) registerSlabLocked(b []byte) error {
	for i, d := range p.domains {
		mr, err := d.pd.Register(b, p.cfg.Access)
		if err != nil {
			for _, o := range p.domains[:i] {
				mrs := *o.mrs.Load()
				mrs[len(mrs)-1].Deregister()
				short := mrs[:len(mrs)-1]
				o.mrs.Store(&short)
			}
			return fmt.Errorf("rdmarpc: register pool slab of %d bytes in a connection's PD: %w", len(b), err)
		}
		old := *d.mrs.Load()
		grown := make([]verbs.MR, len(old)+1)
		copy(grown, old)
		grown[len(old)] = mr
		d.mrs.Store(&grown)
	}
	return nil
}
