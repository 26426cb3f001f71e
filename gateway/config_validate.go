package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/rdmagw/rdmagw/gateway/auxrelay"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// FieldError is one invalid configuration value: Field is its path in the
// YAML file (e.g. "backend.port").
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return "config: " + e.Field + ": " + e.Reason }

// Validate checks every field and returns all problems found, joined
// (errors.As finds the first *FieldError), in the order of the sections
// below.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	switch c.Mode {
	case "forward", "reverse":
	default:
		bad("mode", `must be "forward" or "reverse" (got %q)`, c.Mode)
	}
	c.validateListen(bad)
	if c.Mode == "reverse" {
		c.validateReverse(bad)
	}
	c.validateAuxRelay(bad)
	c.validateBackchannel(bad)
	c.validateOps(bad)
	c.validateConnections(bad)
	c.validateAllowedNetworks(bad)
	c.validateBackend(bad)
	c.validateRDMA(bad)
	c.validateVersions(bad)
	c.validatePool(bad)
	c.validateMetricsAndLog(bad)
	c.validateRuntime(bad)
	return errors.Join(errs...)
}

// rdmaProvider is the verbs provider of the RDMA side: the clients' in
// forward mode, the server's in reverse mode.
func (c *Config) rdmaProvider() string {
	if c.Mode == "reverse" {
		return c.Backend.Provider
	}
	return c.Listen.Provider
}

// validateListen checks where the gateway listens for clients.
func (c *Config) validateListen(bad func(string, string, ...any)) {
	if net.ParseIP(c.Listen.Address) == nil {
		bad("listen.address", "must be an IP address (got %q)", c.Listen.Address)
	}
	// Port 0 picks a free port (tests, the demo); Addr tells which.
	if c.Listen.Port < 0 || c.Listen.Port > 65535 {
		bad("listen.port", "must be between 0 and 65535 (got %d)", c.Listen.Port)
	}
	switch c.Listen.Provider {
	case "iwarp", "ibverbs":
	default:
		bad("listen.provider", `must be "iwarp" or "ibverbs" (got %q)`, c.Listen.Provider)
	}
}

// validateAllowedNetworks checks listen.allowed_networks.
func (c *Config) validateAllowedNetworks(bad func(string, string, ...any)) {
	for i, n := range c.Listen.AllowedNetworks {
		if _, err := netip.ParsePrefix(n); err != nil {
			bad(fmt.Sprintf("listen.allowed_networks[%d]", i), "not a CIDR prefix such as 10.0.0.0/8: %q", n)
		}
	}
}

// validateBackend checks the backend section: the NFS server and how its
// connection is kept.
func (c *Config) validateBackend(bad func(string, string, ...any)) {
	b := &c.Backend
	if b.Address == "" {
		bad("backend.address", "must name the NFS server (host name or IP)")
	}
	checkPort(bad, "backend.port", b.Port)
	checkDuration(bad, "backend.connect_timeout", b.ConnectTimeout, time.Millisecond)
	checkDuration(bad, "backend.reconnect_backoff_initial", b.ReconnectInitial, time.Millisecond)
	checkDuration(bad, "backend.reconnect_backoff_max", b.ReconnectMax, time.Millisecond)
	if b.ReconnectMax < b.ReconnectInitial {
		bad("backend.reconnect_backoff_max", "must be at least reconnect_backoff_initial (%v < %v)", b.ReconnectMax, b.ReconnectInitial)
	}
	checkDuration(bad, "backend.give_up_after", b.GiveUpAfter, 0)
	if b.PingInterval < 0 {
		bad("backend.ping_interval", "must not be negative (0 turns the pings off; got %v)", b.PingInterval)
	}
	if b.PingInterval > 0 {
		checkDuration(bad, "backend.ping_timeout", b.PingTimeout, 0)
	}
	if b.ReconnectGrace < 0 {
		bad("backend.reconnect_grace", "must not be negative (0 closes at once; got %v)", b.ReconnectGrace)
	}
	if b.ConnectionPolicy != PolicyPerClient {
		bad("backend.connection_policy", `must be %q (got %q)`, PolicyPerClient, b.ConnectionPolicy)
	}
	if b.MaxReplyBytes < 4096 || b.MaxReplyBytes > 1<<30 {
		bad("backend.max_reply_bytes", "must be between 4KiB and 1GiB (got %d)", b.MaxReplyBytes)
	}
}

// maxSRQDepth bounds rdma.srq_depth: 1,048,576 receives of 4 KiB are
// already 4 GiB of registered memory.
const maxSRQDepth = 1 << 20

// validateRDMA checks the rdma section: credits, inline sizes and the
// chunk limits.
func (c *Config) validateRDMA(bad func(string, string, ...any)) {
	r := &c.RDMA
	// The engine never grants more credits than receives it posts, and
	// the header's credit field is 32 bits; 4096 receives of 4 KiB are
	// already 16 MiB per connection.
	if r.Credits < 1 || r.Credits > 4096 {
		bad("rdma.credits", "must be between 1 and 4096 (got %d)", r.Credits)
	}
	checkInline(bad, "rdma.inline_recv", r.InlineRecv)
	if r.SRQDepth < 0 || r.SRQDepth > maxSRQDepth {
		bad("rdma.srq_depth", "must be between 0 (receives per connection) and %d (got %d)", maxSRQDepth, r.SRQDepth)
	}
	checkInline(bad, "rdma.inline_send", r.InlineSend)
	if !r.MPACRC && c.rdmaProvider() != "iwarp" {
		bad("rdma.mpa_crc", "applies to the iwarp provider only (with ibverbs the device decides: siw's mpa_crc_required; got false with %q)", c.rdmaProvider())
	}
	checkSendCompletion(bad, r.SendCompletion, c.rdmaProvider(), c.Mode)
	if r.CutThrough != 0 && (r.CutThrough < 4<<10 || r.CutThrough > 16<<20) {
		bad("rdma.cut_through", "must be 0 (off) or between 4KiB and 16MiB (got %v)", r.CutThrough)
	}
	if r.MaxReadsOutstanding < 1 || r.MaxReadsOutstanding > 1024 {
		bad("rdma.max_reads_outstanding", "must be between 1 and 1024 (got %d)", r.MaxReadsOutstanding)
	}
	l := &r.Limits
	// RFC 8267 §6.4.2: a server MUST accept a Position-Zero Read chunk
	// plus one Read chunk, one Write chunk, and up to 16 segments in any
	// chunk; lower limits would refuse conforming clients.
	checkAtLeast(bad, "rdma.limits.max_read_segments", l.MaxReadSegments, 2*minChunkSegments, "two Read chunks of 16 segments")
	checkAtLeast(bad, "rdma.limits.max_read_chunks", l.MaxReadChunks, 2, "a Position-Zero Read chunk plus one Read chunk")
	checkAtLeast(bad, "rdma.limits.max_write_chunks", l.MaxWriteChunks, 1, "one Write chunk")
	checkAtLeast(bad, "rdma.limits.max_segments_per_chunk", l.MaxSegmentsPerChunk, minChunkSegments, "16 segments in any chunk")
	if l.MaxChunkBytes < 4096 {
		bad("rdma.limits.max_chunk_bytes", "must be at least 4KiB (got %d)", l.MaxChunkBytes)
	}
}

// validatePool checks the pool section: ascending classes, the largest
// holding an inline receive, room for two of it.
func (c *Config) validatePool(bad func(string, string, ...any)) {
	p := &c.Pool
	if len(p.Classes) == 0 {
		bad("pool.classes", "must list at least one buffer size")
	}
	for i, cl := range p.Classes {
		if cl < 64 {
			bad(fmt.Sprintf("pool.classes[%d]", i), "must be at least 64 bytes (got %d)", cl)
		}
		if i > 0 && cl <= p.Classes[i-1] {
			bad(fmt.Sprintf("pool.classes[%d]", i), "sizes must ascend (%d after %d)", cl, p.Classes[i-1])
		}
	}
	n := len(p.Classes)
	if n == 0 {
		return
	}
	largest := p.Classes[n-1]
	// A Long Call, a Reply chunk or a READ payload lands in one buffer.
	if largest < c.RDMA.InlineRecv {
		bad("pool.classes", "the largest class (%d) must hold an inline receive (%d)", largest, c.RDMA.InlineRecv)
	}
	if p.MaxBytes < 2*largest {
		bad("pool.max_bytes", "must hold at least two buffers of the largest class (%d < 2 x %d)", p.MaxBytes, largest)
	}
	if p.SlabBytes < largest {
		bad("pool.slab_bytes", "must hold at least one buffer of the largest class (%d < %d)", p.SlabBytes, largest)
	}
}

// validateMetricsAndLog checks the metrics and log sections.
func (c *Config) validateMetricsAndLog(bad func(string, string, ...any)) {
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			bad("metrics.listen", `must be "host:port" or "" to turn metrics off (got %q)`, c.Metrics.Listen)
		}
	} else if c.Metrics.Pprof {
		bad("metrics.pprof", "is served on metrics.listen, which is off")
	}
	switch hclog.LevelFromString(c.Log.Level) {
	case hclog.NoLevel, hclog.Off:
		bad("log.level", "must be trace, debug, info, warn or error (got %q)", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", `must be "text" or "json" (got %q)`, c.Log.Format)
	}
}

func checkPort(bad func(string, string, ...any), field string, port int) {
	if port < 1 || port > 65535 {
		bad(field, "must be between 1 and 65535 (got %d)", port)
	}
}

func checkDuration(bad func(string, string, ...any), field string, d, minimum time.Duration) {
	if d <= minimum {
		bad(field, "must be more than %v (got %v)", minimum, d)
	}
}

// minChunkSegments is the segment count RFC 8267 §6.4.2 lets any chunk have.
const minChunkSegments = 16

// checkAtLeast: v must be at least least, which RFC 8267 §6.4.2 requires
// a server to accept (what says what that is).
func checkAtLeast(bad func(string, string, ...any), field string, v, least int, what string) {
	if v < least {
		bad(field, "must be at least %d, as RFC 8267 §6.4.2 requires servers to accept %s (got %d)", least, what, v)
	}
}

// checkInline: RFC 8797 encodes inline sizes in KiB from 1 KiB to 256 KiB;
// RFC 8166 makes 1024 bytes the smallest threshold a peer must support.
func checkInline(bad func(string, string, ...any), field string, v ByteSize) {
	if !rdmarpc.InlineSizeExact(int(v)) {
		bad(field, "must be a multiple of 1KiB between 1KiB and 256KiB (got %d)", v)
	}
}

// validateAuxRelay checks aux_relay with the relay's own Validate, whose
// field names already carry the "aux_relay." prefix.
func (c *Config) validateAuxRelay(bad func(string, string, ...any)) {
	if !c.AuxRelay.Enabled {
		return
	}
	if c.Mode != "forward" {
		bad("aux_relay.enabled", "the auxiliary relay runs in forward mode only (mode is %q)", c.Mode)
		return
	}
	a := c.AuxRelayConfig()
	err := a.Validate()
	if err == nil {
		return
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *auxrelay.FieldError
		if errors.As(e, &fe) {
			bad(fe.Field, "%s", fe.Reason)
		} else {
			bad("aux_relay", "%v", e)
		}
	}
}

// validateBackchannel checks backchannel (read in both modes; queue only
// in forward mode).
func (c *Config) validateBackchannel(bad func(string, string, ...any)) {
	b := &c.Backchannel
	// Each call outstanding is one more receive of rdma.inline_recv
	// bytes posted per connection; Linux clients grant 16.
	if b.MaxCalls < 1 || b.MaxCalls > MaxBackchannelCalls {
		bad("backchannel.max_calls", "must be between 1 and %d (got %d)", MaxBackchannelCalls, b.MaxCalls)
	}
	// Each queued callback holds up to an inline-sized message.
	if b.Queue < 1 || b.Queue > MaxBackchannelQueue {
		bad("backchannel.queue", "must be between 1 and %d (got %d)", MaxBackchannelQueue, b.Queue)
	}
	checkDuration(bad, "backchannel.timeout", b.Timeout, time.Millisecond)
}

// checkSendCompletion checks rdma.send_completion: placement or transmit,
// and only the mode's default with a provider other than iwarp (there
// the device decides).
func checkSendCompletion(bad func(field, format string, args ...any), v, provider, mode string) {
	switch {
	case v != SendCompletionPlacement && v != SendCompletionTransmit:
		bad("rdma.send_completion", "must be %q or %q (got %q)", SendCompletionPlacement, SendCompletionTransmit, v)
	case v != DefaultSendCompletionFor(mode) && provider != "iwarp":
		bad("rdma.send_completion", "applies to the iwarp provider only (with ibverbs the device decides; got %q with %q)", v, provider)
	}
}
