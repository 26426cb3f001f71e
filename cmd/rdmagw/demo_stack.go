package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/forward"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsmem"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp" // the pure-Go provider the demo runs on
)

// localGateway is a forward gateway run in-process on the pure-Go iWARP
// provider on loopback, as `rdmagw demo` and `rdmagw bench -embedded`
// use it.
type localGateway struct {
	fwd    *forward.Gateway
	cancel context.CancelFunc
	done   chan error
}

// startLocalGateway starts a gateway on a free loopback port in front of
// backend ("host:port"), serving /metrics on metricsListen ("" for none).
func startLocalGateway(backend, metricsListen string, log hclog.Logger) (*localGateway, error) {
	host, port, err := net.SplitHostPort(backend)
	if err != nil {
		return nil, err
	}
	cfg := gateway.DefaultConfig()
	cfg.Listen.Address = "127.0.0.1"
	cfg.Listen.Port = 0
	cfg.Listen.Provider = "iwarp"
	cfg.Backend.Address = host
	if cfg.Backend.Port, err = strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("backend port %q: %w", port, err)
	}
	cfg.Metrics.Listen = metricsListen
	cfg.Pool.MaxBytes = 256 << 20
	fwd, err := forward.New(&cfg, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &localGateway{fwd: fwd, cancel: cancel, done: make(chan error, 1)}
	go func() { g.done <- fwd.Serve(ctx) }()
	return g, nil
}

// metricsURL is the gateway's /metrics URL, or "" when it serves none.
func (g *localGateway) metricsURL() string {
	if a := g.fwd.MetricsAddr(); a != nil {
		return "http://" + a.String() + "/metrics"
	}
	return ""
}

func (g *localGateway) close() {
	g.cancel()
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
	}
	g.fwd.Close()
}

// startMemServer runs the embedded memory NFSv3 server on a free
// loopback port (MOUNT and NFS on it).
func startMemServer(log hclog.Logger) (*nfsmem.Server, string, error) {
	s := nfsmem.New(nfsmem.Config{Logger: log})
	addr, err := s.Listen("127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	return s, addr.String(), nil
}

// rdmaClient is an NFS client transport over RPC-over-RDMA on its own
// pure-Go iWARP device configured by dialRDMAClient's cfg (the zero
// value: the provider's registered default).
type rdmaClient struct {
	*nfsclient.RDMA
	dev verbs.Device
}

// dialRDMAClient connects the demo's or bench's NFS client over the
// pure-Go provider; inline is its inline threshold both ways (0: the
// requester's default, 4096), capped by what the server announces.
func dialRDMAClient(ctx context.Context, addr string, credits int, cfg iwarp.Config, inline int) (*rdmaClient, error) {
	p, err := gateway.Provider("iwarp", cfg)
	if err != nil {
		return nil, err
	}
	dev, err := p.Open("127.0.0.1")
	if err != nil {
		return nil, err
	}
	t, err := nfsclient.DialRDMA(ctx, dev, addr, rdmarpc.RequesterConfig{Credits: credits, InlineSend: inline, InlineRecv: inline})
	if err != nil {
		dev.Close()
		return nil, err
	}
	return &rdmaClient{RDMA: t, dev: dev}, nil
}

func (c *rdmaClient) Close() error {
	err := c.RDMA.Close()
	c.dev.Close()
	return err
}
