package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/rdmagw/rdmagw/gateway/auxrelay"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// Config is the gateway's configuration, as configs/forward.yaml documents
// it field by field. Load it with LoadConfig or ParseConfig: they start
// from DefaultConfig, so a field left out of the file keeps its default,
// and they refuse unknown fields and invalid values.
type Config struct {
	// Mode is "forward" (RDMA clients → TCP server) or "reverse" (TCP
	// clients → RDMA server). The defaults of the listen and backend
	// ports follow it (configs/forward.yaml, configs/reverse.yaml).
	Mode    string        `yaml:"mode"`
	Listen  ListenConfig  `yaml:"listen"`
	Backend BackendConfig `yaml:"backend"`
	RDMA    RDMAConfig    `yaml:"rdma"`
	Reverse ReverseConfig `yaml:"reverse"`
	// AuxRelay (forward mode) answers rpcbind on the gateway's address and
	// relays MOUNT, NLM and NSM to the filer (package gateway/auxrelay,
	// which validates it; default off). Its filer.address defaults to
	// backend.address.
	AuxRelay auxrelay.Config `yaml:"aux_relay"`
	// Backchannel carries NFSv4.1+ callbacks from the server to the
	// client: forward mode from the backend TCP connection to the RDMA
	// client (gateway/forward/backchannel.go), reverse mode from the RDMA connection to
	// the TCP client (gateway/reverse/backchannel.go).
	Backchannel BackchannelConfig `yaml:"backchannel"`
	// Connections (forward mode) bounds what one RDMA client connection
	// may take of the gateway (config_conns.go).
	Connections ConnectionsConfig `yaml:"connections"`
	Pool        PoolConfig        `yaml:"pool"`
	Metrics     MetricsConfig     `yaml:"metrics"`
	Log         LogConfig         `yaml:"log"`

	// Shutdown and Admin: drain and the admin socket (config_ops.go).
	Shutdown ShutdownConfig `yaml:"shutdown"`
	Admin    AdminConfig    `yaml:"admin"`

	// Runtime is the process's CPU policy, GOMAXPROCS (config_runtime.go).
	Runtime RuntimeConfig `yaml:"runtime"`
}

// ListenConfig is where clients connect: RDMA clients in forward mode,
// TCP clients in reverse mode.
type ListenConfig struct {
	Address  string `yaml:"address"`  // IP to listen on ("0.0.0.0" = all)
	Port     int    `yaml:"port"`     // 20049 (NFS/RDMA) forward, 2049 (NFS/TCP) reverse
	Provider string `yaml:"provider"` // forward: verbs provider, "iwarp" or "ibverbs"
	// AllowedNetworks lists the CIDRs clients may connect from; empty
	// allows everyone. Other connection requests are rejected and counted.
	AllowedNetworks []string `yaml:"allowed_networks"`
}

// BackendConfig is the NFS server the gateway forwards to: over TCP in
// forward mode, over RPC-over-RDMA in reverse mode.
type BackendConfig struct {
	Address string `yaml:"address"`
	Port    int    `yaml:"port"`
	// Provider (reverse mode) is the verbs provider of the RDMA side:
	// "iwarp" (pure Go) or "ibverbs".
	Provider string `yaml:"provider"`
	// LocalAddress (reverse mode) is the local IP on the RDMA fabric; it
	// picks the RDMA device ("0.0.0.0": any, enough for iwarp; ibverbs
	// needs the IP of the RDMA interface).
	LocalAddress   string        `yaml:"local_address"`
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// ConnectionPolicy: "per_client" opens one backend connection per
	// RDMA client connection (XIDs pass through unchanged).
	ConnectionPolicy string `yaml:"connection_policy"`
	// ReservedSourcePort binds backend connections to a port below 1024,
	// for servers that export with "secure" (the Linux nfsd default).
	ReservedSourcePort bool          `yaml:"reserved_source_port"`
	ReconnectInitial   time.Duration `yaml:"reconnect_backoff_initial"`
	ReconnectMax       time.Duration `yaml:"reconnect_backoff_max"`
	GiveUpAfter        time.Duration `yaml:"give_up_after"`
	// MaxReplyBytes bounds one reply record from the server (forward).
	MaxReplyBytes ByteSize `yaml:"max_reply_bytes"`
	// PingInterval (forward): a backend connection from which nothing
	// arrived for this long (idle, or calls outstanding without reply) is
	// checked with an RPC NULL call; 0 turns the pings off.
	PingInterval time.Duration `yaml:"ping_interval"`
	// PingTimeout (forward): a ping with no byte from the server within
	// this long counts the connection hung: it is closed and re-established
	// like a failed one.
	PingTimeout time.Duration `yaml:"ping_timeout"`
	// ReconnectGrace (forward): when a client disconnects, its backend
	// connection stays open this long for a client reconnecting from the
	// same IP address, so its retransmissions reach the server from the
	// same source port (gateway/forward/park.go); 0 closes it at once.
	ReconnectGrace time.Duration `yaml:"reconnect_grace"`
	// RDMAVersion (reverse mode) is the RPC-over-RDMA version the gateway
	// speaks to the server: "auto" (try version two, continue in version
	// one when the server answers ERR_VERS, and remember that per server
	// address), "1" or "2" (config_rdmaversion.go).
	RDMAVersion string `yaml:"rdma_version"`
}

// ReverseConfig tunes reverse mode (TCP clients → RDMA server).
type ReverseConfig struct {
	// MaxCallsPerClient bounds the calls one TCP client may have at the
	// server at once; while it has that many, its socket is not read
	// (back-pressure instead of an unbounded queue).
	MaxCallsPerClient int `yaml:"max_calls_per_client"`
	// PingInterval is how often an idle RDMA connection is checked with
	// a NULL call on the reserve credit (RFC 8267 §6.7.2); 0 turns the
	// pings off.
	PingInterval time.Duration `yaml:"ping_interval"`
	// PingTimeout is how long a ping may go unanswered before the server
	// is presumed dead and the connection re-established.
	PingTimeout time.Duration `yaml:"ping_timeout"`
	// ReplyChunkRetries bounds the short Reply chunk retries of one call
	// (RFC 8267 §3.1), for the calls whose reply size cannot be bounded.
	ReplyChunkRetries int `yaml:"reply_chunk_retries"`
	// MaxCallBytes bounds one call record from a TCP client; a larger
	// one is answered GARBAGE_ARGS and skipped (the connection kept).
	MaxCallBytes ByteSize `yaml:"max_call_bytes"`
	// MaxReadChunks and MaxWriteChunks bound the Read chunks (besides a
	// Position-Zero chunk) and Write chunks one call offers the server.
	// RFC 8267 §6.4.2: without knowledge of the server's limits a client
	// SHOULD use at most one of each; items past the limit travel in the
	// Long Call or the Reply chunk instead.
	MaxReadChunks  int `yaml:"max_read_chunks"`
	MaxWriteChunks int `yaml:"max_write_chunks"`
}

// RDMAConfig tunes the RPC-over-RDMA responder.
type RDMAConfig struct {
	Credits             int          `yaml:"credits"`
	InlineRecv          ByteSize     `yaml:"inline_recv"`
	InlineSend          ByteSize     `yaml:"inline_send"`
	MaxReadsOutstanding int          `yaml:"max_reads_outstanding"`
	Limits              LimitsConfig `yaml:"limits"`
	// SRQDepth (forward): receives shared by all client connections
	// through one shared receive queue; 0 = each connection posts its
	// own credits + 8 (rdmarpc.SharedRecv, configs/forward.yaml).
	SRQDepth int `yaml:"srq_depth"`
	// Versions (forward mode) lists the RPC-over-RDMA versions accepted
	// from clients: [1, 2] (the default) or [1]; each connection's first
	// message decides its version (config_rdmaversion.go).
	Versions []int `yaml:"versions"`
	// MPACRC (the pure-Go iwarp provider, both modes): ask for MPA CRCs
	// (RFC 5044 §8.1, the default). false asks for none; a peer that asks
	// still gets them, so CRCs are off only when neither side wants them
	// (Linux siw asks only with mpa_crc_required). An administrative
	// choice for fabrics whose links already protect the data.
	MPACRC bool `yaml:"mpa_crc"`
	// SendCompletion (the pure-Go iwarp provider, both modes): when the
	// gateway's Sends and RDMA Writes complete. "placement" (a zero-length
	// RDMA Read after each burst proves them placed, as an InfiniBand ACK
	// does) or "transmit" (when handed to TCP, as Linux siw does:
	// iwarp.Config.CompleteOnTransmit). The default is the mode's
	// (DefaultSendCompletionFor); with ibverbs the device decides.
	SendCompletion string `yaml:"send_completion"`
	// CutThrough (forward mode): a READ's data (any DDP item bound for a
	// client's Write chunk) is RDMA-written as it arrives from the
	// backend, whenever this many more bytes of it are in, instead of
	// after the whole reply (rdmarpc.Call.WriteAhead); 0 turns it off.
	CutThrough ByteSize `yaml:"cut_through"`
}

// DefaultCutThrough is rdma.cut_through's default (README, "Cut-through").
const DefaultCutThrough = 128 << 10

// The rdma.send_completion values.
const (
	SendCompletionPlacement = "placement"
	SendCompletionTransmit  = "transmit"
	// DefaultSendCompletion is forward mode's default: transmit, as
	// Linux siw does; the gateway's reply completes inside the post and
	// is taken on the posting goroutine (rdmarpc settlePosts), so it
	// costs neither the zero-length Read nor a wake-up. Reverse mode,
	// whose calls' completions still wake its completion goroutine
	// (rdmarpc's requester does not settle its posts) and which was not
	// measured, keeps placement (DefaultSendCompletionReverse). See the
	// README ("Send completions") for the measurements.
	DefaultSendCompletion        = SendCompletionTransmit
	DefaultSendCompletionReverse = SendCompletionPlacement
)

// DefaultSendCompletionFor is mode's rdma.send_completion default.
func DefaultSendCompletionFor(mode string) string {
	if mode == "reverse" {
		return DefaultSendCompletionReverse
	}
	return DefaultSendCompletion
}

// LimitsConfig mirrors rdmarpc.Limits: what one transport header may ask.
type LimitsConfig struct {
	MaxReadSegments     int      `yaml:"max_read_segments"`
	MaxReadChunks       int      `yaml:"max_read_chunks"`
	MaxWriteChunks      int      `yaml:"max_write_chunks"`
	MaxSegmentsPerChunk int      `yaml:"max_segments_per_chunk"`
	MaxChunkBytes       ByteSize `yaml:"max_chunk_bytes"`
}

// PoolConfig sizes the registered buffer pool shared by all connections.
type PoolConfig struct {
	MaxBytes  ByteSize   `yaml:"max_bytes"`
	SlabBytes ByteSize   `yaml:"slab_bytes"`
	Classes   []ByteSize `yaml:"classes"`
}

// MetricsConfig is the Prometheus endpoint.
type MetricsConfig struct {
	Listen string `yaml:"listen"` // "host:port" serving /metrics; "" turns it off
	// Pprof also serves Go's profiler (net/http/pprof) under /debug/pprof/
	// on the same listener, for CPU and heap profiles of a running gateway.
	Pprof bool `yaml:"pprof"`
	// Sessions also serves the live view of the clients as JSON under
	// /debug/sessions on the same listener (what `rdmagw sessions` shows).
	Sessions bool `yaml:"sessions"`
}

// LogConfig is the go-hclog logger.
type LogConfig struct {
	Level  string `yaml:"level"`  // trace, debug, info, warn, error
	Format string `yaml:"format"` // text or json
}

// Defaults of the configuration; configs/forward.yaml says why.
const (
	DefaultListenPort     = 20049
	DefaultBackendPort    = 2049
	DefaultReverseListen  = 2049  // NFS over TCP
	DefaultReverseBackend = 20049 // NFS over RDMA
	DefaultCallsPerClient = 64
	DefaultPingInterval   = 10 * time.Second
	DefaultPingTimeout    = 5 * time.Second
	DefaultChunkRetries   = 2
	DefaultMetricsListen  = "127.0.0.1:9464"
	DefaultCredits        = 128
	DefaultInline         = 4096
	DefaultReadsInFlight  = 16
	DefaultPoolMaxBytes   = 512 << 20
	DefaultConnectTimeout = 5 * time.Second
	DefaultReconnectInit  = 100 * time.Millisecond
	DefaultReconnectMax   = 5 * time.Second
	DefaultGiveUpAfter    = 60 * time.Second
	DefaultBackendPing    = 10 * time.Second
	DefaultBackendPingTO  = 10 * time.Second
	DefaultReconnectGrace = 90 * time.Second
	PolicyPerClient       = "per_client"
)

// DefaultConfigFor returns the defaults of mode ("forward" or "reverse"):
// they differ in the listen and backend ports.
func DefaultConfigFor(mode string) Config {
	c := DefaultConfig()
	c.Mode = mode
	if mode == "reverse" {
		c.Listen.Port = DefaultReverseListen
		c.Backend.Port = DefaultReverseBackend
		c.RDMA.SendCompletion = DefaultSendCompletionReverse
	}
	return c
}

// DefaultConfig returns the forward configuration with every default
// filled in.
func DefaultConfig() Config {
	return Config{
		Mode: "forward",
		Listen: ListenConfig{
			Address:  "0.0.0.0",
			Port:     DefaultListenPort,
			Provider: "iwarp",
		},
		Backend: defaultBackendConfig(),
		RDMA:    defaultRDMAConfig(),
		Reverse: ReverseConfig{
			MaxCallsPerClient: DefaultCallsPerClient,
			PingInterval:      DefaultPingInterval,
			PingTimeout:       DefaultPingTimeout,
			ReplyChunkRetries: DefaultChunkRetries,
			MaxCallBytes:      ByteSize(defaultMaxReply),
			MaxReadChunks:     1,
			MaxWriteChunks:    1,
		},
		AuxRelay:    auxrelay.DefaultConfig(),
		Backchannel: DefaultBackchannel,
		Connections: DefaultConnections,
		Pool:        defaultPoolConfig(),
		Metrics:     MetricsConfig{Listen: DefaultMetricsListen},
		Log:         LogConfig{Level: "info", Format: "text"},

		Shutdown: ShutdownConfig{DrainTimeout: DefaultDrainTimeout},
		Runtime:  RuntimeConfig{Procs: ProcsAuto},
	}
}

// defaultBackendConfig is the backend section of DefaultConfig.
func defaultBackendConfig() BackendConfig {
	return BackendConfig{
		Address:          "127.0.0.1",
		Port:             DefaultBackendPort,
		Provider:         "iwarp",
		LocalAddress:     "0.0.0.0",
		ConnectTimeout:   DefaultConnectTimeout,
		ConnectionPolicy: PolicyPerClient,
		ReconnectInitial: DefaultReconnectInit,
		ReconnectMax:     DefaultReconnectMax,
		GiveUpAfter:      DefaultGiveUpAfter,
		MaxReplyBytes:    ByteSize(defaultMaxReply),
		PingInterval:     DefaultBackendPing,
		PingTimeout:      DefaultBackendPingTO,
		ReconnectGrace:   DefaultReconnectGrace,
		RDMAVersion:      DefaultRDMAVersion,
	}
}

// defaultRDMAConfig is the rdma section of DefaultConfig: the engine's
// default chunk limits (rdmarpc.DefaultLimits).
func defaultRDMAConfig() RDMAConfig {
	lim := rdmarpc.DefaultLimits()
	return RDMAConfig{
		Credits:             DefaultCredits,
		InlineRecv:          DefaultInline,
		InlineSend:          DefaultInline,
		MaxReadsOutstanding: DefaultReadsInFlight,
		Versions:            slices.Clone(DefaultVersions),
		MPACRC:              true,
		SendCompletion:      DefaultSendCompletion,
		CutThrough:          DefaultCutThrough,
		Limits: LimitsConfig{
			MaxReadSegments:     lim.MaxReadSegments,
			MaxReadChunks:       lim.MaxReadChunks,
			MaxWriteChunks:      lim.MaxWriteChunks,
			MaxSegmentsPerChunk: lim.MaxSegmentsPerChunk,
			MaxChunkBytes:       ByteSize(lim.MaxChunkBytes),
		},
	}
}

// defaultPoolConfig is the pool section of DefaultConfig: the engine's
// default buffer classes (rdmarpc.DefaultClasses).
func defaultPoolConfig() PoolConfig {
	classes := make([]ByteSize, len(rdmarpc.DefaultClasses))
	for i, c := range rdmarpc.DefaultClasses {
		classes[i] = ByteSize(c)
	}
	return PoolConfig{
		MaxBytes:  DefaultPoolMaxBytes,
		SlabBytes: 4 << 20,
		Classes:   classes,
	}
}

// defaultMaxReply fits a 1 MiB READ reply with its headers, as the
// record reader's default does.
const defaultMaxReply = 1<<20 + 64<<10

// LoadConfig reads and validates the YAML file at path.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes YAML over the defaults of the mode it names,
// strictly (an unknown field is an error naming it and its line), and
// validates the result.
func ParseConfig(b []byte) (*Config, error) {
	// The mode first: the port defaults depend on it.
	var m struct {
		Mode string `yaml:"mode"`
	}
	_ = yaml.Unmarshal(b, &m) // a broken document fails below, with its line
	cfg := DefaultConfig()
	if m.Mode == "reverse" {
		cfg = DefaultConfigFor(m.Mode)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %w", err)
	}
	// A second document in the file is a mistake, not something to ignore.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, errors.New("config: more than one YAML document")
	}
	cfg.AuxRelay = cfg.AuxRelayConfig()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// RDMALimits converts the limits section for the engine.
func (c *Config) RDMALimits() rdmarpc.Limits {
	l := c.RDMA.Limits
	return rdmarpc.Limits{
		MaxReadSegments:     l.MaxReadSegments,
		MaxReadChunks:       l.MaxReadChunks,
		MaxWriteChunks:      l.MaxWriteChunks,
		MaxSegmentsPerChunk: l.MaxSegmentsPerChunk,
		MaxChunkBytes:       uint64(l.MaxChunkBytes),
	}
}

// PoolClasses returns the pool's buffer sizes as ints.
func (c *Config) PoolClasses() []int {
	cl := make([]int, len(c.Pool.Classes))
	for i, v := range c.Pool.Classes {
		cl[i] = int(v)
	}
	return cl
}

// AuxRelayConfig is aux_relay with its defaults that depend on the rest
// of the configuration filled in: an enabled relay's empty filer.address
// is backend.address.
func (c *Config) AuxRelayConfig() auxrelay.Config {
	a := c.AuxRelay
	if a.Enabled && a.Filer.Address == "" {
		a.Filer.Address = c.Backend.Address
	}
	return a
}
