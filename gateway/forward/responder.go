package forward

import (
	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// How the pool is shared between the connections' receives and their calls.
const (
	callMemoryShareOfPool   = 2 // all calls together hold at most pool.max_bytes / 2
	recvPoolSlabConnections = 4 // receive pool slabs hold this many connections' receives
)

// responderConfig is the engine configuration of a client connection
// made under cfg.
func (f *Gateway) responderConfig(cfg *gateway.Config, met rdmarpc.ResponderMetrics) rdmarpc.ResponderConfig {
	return rdmarpc.ResponderConfig{
		Credits:             cfg.RDMA.Credits,
		InlineRecv:          int(cfg.RDMA.InlineRecv),
		InlineSend:          int(cfg.RDMA.InlineSend),
		MaxReadsOutstanding: cfg.RDMA.MaxReadsOutstanding,
		Limits:              cfg.RDMALimits(),
		Pool:                f.rdma.Pool,
		RecvPool:            f.recvPool,
		SharedRecv:          f.sharedRecv,
		Logger:              f.log.Named("rdma"),
		Metrics:             met,
		Backchannel:         cfg.ResponderBackchannel(),
		MaxCallBytes:        int(cfg.Connections.MaxCallMemory),
		CallQuota:           f.callQuota,
		ReplyTimeout:        cfg.Connections.ReplyTimeout,
		IdleTimeout:         cfg.Connections.IdleTimeout,
		V2:                  cfg.ServesV2(), // rdma.versions
	}
}

// openRecvPool makes the pool the connections' receive buffers come from:
// apart from the data pool, sized for connections.max connections, so
// that idle connections never take memory calls and replies need, and
// the other way round. A reload that raises connections.max raises its
// ceiling (admit); the receives per connection need a restart.
//
// With rdma.srq_depth the pool holds exactly that many receives, posted
// on one shared receive queue at start (openSharedRecv) and shared by
// every connection: registered receive memory no longer grows with
// connections x credits.
func (f *Gateway) openRecvPool() error {
	f.callQuota = rdmarpc.NewQuota(int64(f.cfg.Pool.MaxBytes)/callMemoryShareOfPool, nil)
	if f.cfg.RDMA.SRQDepth > 0 {
		return f.openSharedRecv()
	}
	rc := f.responderConfig(f.cfg, nil)
	perConn := rc.Receives() * int(f.cfg.RDMA.InlineRecv)
	p, err := rdmarpc.NewPool(f.rdma.PD, rdmarpc.PoolConfig{
		MaxBytes:  f.cfg.Connections.Max * perConn,
		SlabBytes: recvPoolSlabConnections * perConn,
		Classes:   []int{int(f.cfg.RDMA.InlineRecv)},
	})
	if err != nil {
		return err
	}
	f.recvPool, f.recvPerConn = p, perConn
	f.met.RegisterReceives(p, nil)
	return nil
}

// openSharedRecv maps rdma.srq_depth receive buffers and posts them on
// the shared receive queue every connection is accepted onto.
func (f *Gateway) openSharedRecv() error {
	depth, size := f.cfg.RDMA.SRQDepth, int(f.cfg.RDMA.InlineRecv)
	p, err := rdmarpc.NewPool(f.rdma.PD, rdmarpc.PoolConfig{
		MaxBytes:  depth * size,
		SlabBytes: min(depth*size, 4<<20),
		Classes:   []int{size},
	})
	if err != nil {
		return err
	}
	f.recvPool = p // closed after sharedRecv (Close)
	f.sharedRecv, err = rdmarpc.NewSharedRecv(p, rdmarpc.SharedRecvConfig{Depth: depth, BufSize: size,
		Metrics: f.met.SharedRecvMetrics(), Logger: f.log.Named("rdma")})
	if err != nil {
		return err
	}
	f.met.RegisterReceives(p, f.sharedRecv)
	return nil
}
