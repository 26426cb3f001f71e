package auxrelay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// maxRoutes bounds each routing table (locks, cookies, clients).
const maxRoutes = 65536

// Relay is the auxiliary-protocol relay: an rpcbind responder and the
// MOUNT, NLM and NSM relays. Create it with New, run it with Run.
type Relay struct {
	cfg      Config
	log      hclog.Logger
	m        Metrics
	listenIP netip.Addr
	filerIPs []netip.Addr

	pending *pendingTable
	out     *outbound
	ports   *portCache
	routes  *routes
	table   *rpcbTable
	ctx     context.Context

	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	closers map[io.Closer]struct{}
	bound   map[string]netip.AddrPort // "mount/tcp" → address
	ready   chan struct{}
}

// New checks cfg and builds a relay; nothing is bound until Run. logger
// and metrics may be nil.
func New(cfg Config, logger hclog.Logger, metrics Metrics) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if metrics == nil {
		metrics = NopMetrics{}
	}
	r := &Relay{
		cfg:     cfg,
		log:     logger.Named("auxrelay"),
		m:       metrics,
		pending: newPendingTable(),
		ports:   &portCache{ttl: cfg.PortCacheTTL, m: map[portKey]portEntry{}},
		routes:  newRoutes(cfg.RouteTTL, maxRoutes),
		closers: map[io.Closer]struct{}{},
		bound:   map[string]netip.AddrPort{},
		ready:   make(chan struct{}),
	}
	if cfg.Enabled {
		r.listenIP = netip.MustParseAddr(cfg.ListenAddress).Unmap()
	}
	r.out = newOutbound(r)
	return r, nil
}

// Ready is closed once every listener is bound.
func (r *Relay) Ready() <-chan struct{} { return r.ready }

// Addr returns where service ("rpcbind", "mount", "nlm", "nsm") listens
// over transport ("tcp", "udp"), once Ready.
func (r *Relay) Addr(service, transport string) netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bound[service+"/"+transport]
}

// Run binds the listeners and serves until ctx is done, then closes every
// socket and waits for its goroutines. A disabled relay returns nil at once.
func (r *Relay) Run(ctx context.Context) error {
	if !r.cfg.Enabled {
		close(r.ready)
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.ctx = ctx
	if err := r.resolveFiler(ctx); err != nil {
		return err
	}
	services := []struct {
		name string
		port int
	}{{"mount", r.cfg.MountPort}, {"nlm", r.cfg.NLMPort}, {"nsm", r.cfg.NSMPort}}
	if r.cfg.RPCBindPort >= 0 {
		services = append(services, struct {
			name string
			port int
		}{"rpcbind", r.cfg.RPCBindPort})
	}
	for _, s := range services {
		if err := r.listen(ctx, s.name, s.port); err != nil {
			r.shutdown()
			return err
		}
	}
	r.table = r.buildTable()
	r.log.Info("auxiliary relay up", "mount", r.Addr("mount", "tcp").String(), "nlm", r.Addr("nlm", "tcp").String(),
		"nsm", r.Addr("nsm", "tcp").String(), "rpcbind", r.Addr("rpcbind", "tcp").String(), "udp", r.cfg.UDP,
		"filer", r.cfg.Filer.Address)
	close(r.ready)

	tick := time.NewTicker(min(time.Second, r.cfg.CallTimeout/2))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			r.shutdown()
			r.log.Info("auxiliary relay stopped")
			return nil
		case now := <-tick.C:
			r.expire(now)
		}
	}
}

// expire forgets calls that got no reply in time and stale routes.
func (r *Relay) expire(now time.Time) {
	for _, pc := range r.pending.expire(now.Add(-r.cfg.CallTimeout)) {
		r.m.Event(eventCallTimeout)
		r.log.Debug("call timed out", "program", progLabel(pc.prog), "procedure", procLabel(pc.prog, pc.vers, pc.proc),
			"from", pc.sink.id(), "to", pc.dest)
	}
	r.routes.expire(now)
}

func (r *Relay) resolveFiler(ctx context.Context) error {
	host := r.cfg.Filer.Address
	if ip, err := netip.ParseAddr(host); err == nil {
		r.filerIPs = []netip.Addr{ip.Unmap()}
		return nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return &FieldError{Field: "aux_relay.filer.address", Reason: fmt.Sprintf("cannot resolve %q: %v", host, err)}
	}
	for _, ip := range ips {
		r.filerIPs = append(r.filerIPs, ip.Unmap())
	}
	return nil
}

// listen binds service's TCP listener and, with UDP on, a UDP socket on
// the same port number (the rpcbind answer then holds for both).
func (r *Relay) listen(ctx context.Context, name string, port int) error {
	host := r.listenIP.String()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("auxrelay: %s listener: %w", name, err)
	}
	bound := addrPortOf(ln.Addr())
	r.track(ln)
	r.mu.Lock()
	r.bound[name+"/tcp"] = netip.AddrPortFrom(bound.Addr().Unmap(), bound.Port())
	r.mu.Unlock()
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.serveTCP(ctx, ln) }()
	if !r.cfg.UDP {
		return nil
	}
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.listenIP, bound.Port())))
	if err != nil {
		return fmt.Errorf("auxrelay: %s UDP listener on port %d: %w", name, bound.Port(), err)
	}
	r.track(pc)
	r.mu.Lock()
	r.bound[name+"/udp"] = netip.AddrPortFrom(r.listenIP, bound.Port())
	r.mu.Unlock()
	r.wg.Add(1)
	go func() { defer r.wg.Done(); r.serveUDP(ctx, pc) }()
	return nil
}

// buildTable lists the relay's services for the rpcbind responder.
func (r *Relay) buildTable() *rpcbTable {
	t := &rpcbTable{now: time.Now}
	if r.cfg.AdvertiseAddress != "" {
		t.advertise = netip.MustParseAddr(r.cfg.AdvertiseAddress).Unmap()
	} else if !r.listenIP.IsUnspecified() {
		t.advertise = r.listenIP
	}
	fams := []string{""}
	switch {
	case r.listenIP.Is6() && r.listenIP.IsUnspecified():
		fams = []string{"", "6"}
	case r.listenIP.Is6():
		fams = []string{"6"}
	}
	add := func(prog uint32, vers []uint32, proto string, port int) {
		for _, f := range fams {
			for _, v := range vers {
				t.entries = append(t.entries, rpcbEntry{Prog: prog, Vers: v, Netid: proto + f, Port: port})
			}
		}
	}
	protos := []string{"tcp"}
	if r.cfg.UDP {
		protos = append(protos, "udp")
	}
	for _, p := range protos {
		if a := r.Addr("rpcbind", "tcp"); a.IsValid() {
			add(progRPCBind, []uint32{2, 3, 4}, p, int(a.Port()))
		}
		add(progMount, relayedVersions[progMount], p, int(r.Addr("mount", "tcp").Port()))
		add(progNLM, relayedVersions[progNLM], p, int(r.Addr("nlm", "tcp").Port()))
		add(progNSM, relayedVersions[progNSM], p, int(r.Addr("nsm", "tcp").Port()))
	}
	if r.cfg.NFSRDMAPort > 0 {
		add(progNFS, []uint32{3, 4}, "rdma", r.cfg.NFSRDMAPort)
	}
	if r.cfg.NFSTCPPort > 0 {
		add(progNFS, []uint32{3, 4}, "tcp", r.cfg.NFSTCPPort)
	}
	return t
}

// track registers a socket to close on shutdown; false if already shut.
func (r *Relay) track(c io.Closer) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.closers[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c io.Closer) {
	c.Close()
	r.mu.Lock()
	delete(r.closers, c)
	r.mu.Unlock()
}

func (r *Relay) shutdown() {
	r.mu.Lock()
	r.closed = true
	cs := make([]io.Closer, 0, len(r.closers))
	for c := range r.closers {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	for _, c := range cs {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			r.log.Debug("close", "error", err)
		}
	}
	r.wg.Wait()
}
