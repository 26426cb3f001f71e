package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
)

// rdmaStack is what both modes hold on their RDMA side: the provider's
// device, one protection domain and the registered buffer pool every
// connection draws from. Forward opens it on its listen address, Reverse
// on backend.local_address.
type rdmaStack struct {
	dev  verbs.Device
	pd   verbs.PD
	pool *rdmarpc.Pool
}

// open opens provider's device for addr, allocates the protection domain
// and the pool (sized by cfg.Pool) and exports the pool's gauges. field
// names the provider's config field for errors. On failure what was
// opened stays set, for close.
func (s *rdmaStack) open(cfg *Config, field, provider, addr string, met *Metrics) error {
	prov, err := verbs.Lookup(provider)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if s.dev, err = prov.Open(addr); err != nil {
		return fmt.Errorf("open %s device for %s: %w", provider, addr, err)
	}
	if s.pd, err = s.dev.AllocPD(); err != nil {
		return fmt.Errorf("allocate protection domain: %w", err)
	}
	s.pool, err = rdmarpc.NewPool(s.pd, rdmarpc.PoolConfig{
		MaxBytes:  int(cfg.Pool.MaxBytes),
		SlabBytes: int(cfg.Pool.SlabBytes),
		Classes:   cfg.PoolClasses(),
	})
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	met.registerPool(s.pool)
	return nil
}

// close releases the pool, the protection domain and the device, in that
// order (each needs the next); what was never opened is skipped.
func (s *rdmaStack) close() []error {
	var errs []error
	if s.pool != nil {
		errs = append(errs, s.pool.Close())
	}
	if s.pd != nil {
		errs = append(errs, s.pd.Close())
	}
	if s.dev != nil {
		errs = append(errs, s.dev.Close())
	}
	return errs
}

// closeGateway is the shared teardown, after Serve has returned: stop
// accepting (a listener Serve already closed is no error), stop serving
// /metrics, wait for the sessions (wait), then release the RDMA side.
func closeGateway(ln io.Closer, ms *metricsServer, wait func(), rdma *rdmaStack) error {
	var errs []error
	if ln != nil {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if ms != nil {
		errs = append(errs, ms.close())
	}
	wait()
	errs = append(errs, rdma.close()...)
	return errors.Join(errs...)
}
