package gateway

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
)

// RDMAStack is what both modes hold on their RDMA side: the provider's
// device, one protection domain and the registered buffer pool every
// connection draws from. Forward opens it on its listen address, Reverse
// on backend.local_address.
type RDMAStack struct {
	Dev  verbs.Device
	PD   verbs.PD
	Pool *rdmarpc.Pool
}

// Open opens provider's device for addr (Provider: the iwarp provider as
// RDMAConfig.IWARPConfig says, rdma.mpa_crc and rdma.send_completion),
// allocates the protection domain
// and the pool (sized by cfg.Pool) and exports the pool's gauges. field
// names the provider's config field for errors. On failure what was
// opened stays set, for close.
func (s *RDMAStack) Open(cfg *Config, field, provider, addr string, met *Metrics) error {
	prov, err := Provider(provider, cfg.RDMA.IWARPConfig())
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if s.Dev, err = prov.Open(addr); err != nil {
		return fmt.Errorf("open %s device for %s: %w", provider, addr, err)
	}
	if s.PD, err = s.Dev.AllocPD(); err != nil {
		return fmt.Errorf("allocate protection domain: %w", err)
	}
	s.Pool, err = rdmarpc.NewPool(s.PD, rdmarpc.PoolConfig{
		MaxBytes:  int(cfg.Pool.MaxBytes),
		SlabBytes: int(cfg.Pool.SlabBytes),
		Classes:   cfg.PoolClasses(),
	})
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	met.registerPool(s.Pool)
	return nil
}

// Close releases the pool, the protection domain and the device, in that
// order (each needs the next); what was never opened is skipped.
func (s *RDMAStack) Close() []error {
	var errs []error
	if s.Pool != nil {
		errs = append(errs, s.Pool.Close())
	}
	if s.PD != nil {
		errs = append(errs, s.PD.Close())
	}
	if s.Dev != nil {
		errs = append(errs, s.Dev.Close())
	}
	return errs
}

// CloseGateway is the shared teardown, after Serve has returned: stop
// accepting (a listener Serve already closed is no error), stop serving
// /metrics, wait for the sessions (wait), then release the RDMA side.
func CloseGateway(ln io.Closer, ms *MetricsServer, wait func(), rdma *RDMAStack) error {
	var errs []error
	if ln != nil {
		if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, verbs.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if ms != nil {
		errs = append(errs, ms.Close())
	}
	wait()
	errs = append(errs, rdma.Close()...)
	return errors.Join(errs...)
}

// Provider returns the RDMA provider registered as name, except that the
// pure-Go provider ("iwarp") is configured as ic says when ic is not the
// zero value (the registered default): the one place the gateway's RDMA
// stack and rdmagw's own clients (demo, bench, bench-conns) pick theirs.
func Provider(name string, ic iwarp.Config) (verbs.Provider, error) {
	p, err := verbs.Lookup(name)
	if err != nil {
		return nil, err
	}
	if name == "iwarp" && ic != (iwarp.Config{}) {
		p = iwarp.New(ic)
	}
	return p, nil
}

// IWARPConfig is the pure-Go iwarp provider's configuration the rdma
// section asks for (IWARPConfigFor rdma.mpa_crc and rdma.send_completion).
func (r *RDMAConfig) IWARPConfig() iwarp.Config {
	return IWARPConfigFor(r.MPACRC, r.SendCompletion)
}

// IWARPConfigFor is the pure-Go iwarp provider's configuration for MPA
// CRCs asked for or not (mpaCRC false: DisableCRC) and sendCompletion
// (SendCompletionTransmit: CompleteOnTransmit; anything else, placement):
// the one mapping of these settings, for the gateway's rdma section and
// rdmagw's bench clients alike. CRCs on and placement give the zero
// value, the provider's registered default.
func IWARPConfigFor(mpaCRC bool, sendCompletion string) iwarp.Config {
	return iwarp.Config{DisableCRC: !mpaCRC, CompleteOnTransmit: sendCompletion == SendCompletionTransmit}
}
