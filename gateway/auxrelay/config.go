package auxrelay

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Config is the relay's configuration. The gateway nests it under the key
// "aux_relay" of its YAML file; field paths in errors are given relative to
// that key's parent ("aux_relay.filer.address").
type Config struct {
	// Enabled turns the relay on. Off, New still validates nothing else
	// and Run returns at once.
	Enabled bool `yaml:"enabled"`
	// ListenAddress is the IP the relay listens on and sends from
	// (callbacks must come from the address the client mounted).
	ListenAddress string `yaml:"listen_address"`
	// AdvertiseAddress is the IP put into rpcbind answers (universal
	// addresses) and into SM_NOTIFY mon_name on fan-out. Empty: the
	// listen address, or the address a TCP query arrived on when that is
	// a wildcard.
	AdvertiseAddress string `yaml:"advertise_address"`
	// RPCBindPort is where the rpcbind responder listens (111 in
	// production; 0 = ephemeral, for tests). -1 runs no responder.
	RPCBindPort int `yaml:"rpcbind_port"`
	// MountPort, NLMPort, NSMPort are the relay's listen ports per
	// program; 0 picks an ephemeral port (rpcbind answers with it).
	MountPort int `yaml:"mount_port"`
	NLMPort   int `yaml:"nlm_port"`
	NSMPort   int `yaml:"nsm_port"`
	// UDP also serves every program over UDP on the same port numbers.
	UDP bool `yaml:"udp"`
	// NFSRDMAPort is answered for NFS (100003) on netids rdma/rdma6;
	// NFSTCPPort for tcp (0 = not advertised).
	NFSRDMAPort int `yaml:"nfs_rdma_port"`
	NFSTCPPort  int `yaml:"nfs_tcp_port"`

	Filer FilerConfig `yaml:"filer"`

	// ClientRPCBindPort is the port of the clients' rpcbind, asked for
	// their NLM and NSM ports when a callback or a notification must be
	// delivered (111 in production).
	ClientRPCBindPort int `yaml:"client_rpcbind_port"`
	// ReservedSourcePort binds connections to the filer to a port below
	// 1024 (Linux mountd's "secure" default refuses others).
	ReservedSourcePort bool `yaml:"reserved_source_port"`
	// NLMCallerName, when set, replaces caller_name in NLM calls to the
	// filer (and is put back in callbacks). Needed for filers that call
	// back the host named by caller_name (nfs-ganesha) rather than the
	// source address (Linux lockd): set it to a name or IP that resolves
	// to this relay. See doc.go for what it costs.
	NLMCallerName string `yaml:"nlm_caller_name"`
	// NotifyMonName is the mon_name put in SM_NOTIFY forwarded to clients
	// when the filer reboots: the name the clients mounted the gateway by
	// (Linux clients monitor the server's IP by default). Empty: the
	// advertise address.
	NotifyMonName string `yaml:"notify_mon_name"`

	CallTimeout    time.Duration `yaml:"call_timeout"`    // a forwarded call without reply is forgotten after this
	ConnectTimeout time.Duration `yaml:"connect_timeout"` // TCP connects to the filer and to clients
	PortCacheTTL   time.Duration `yaml:"port_cache_ttl"`  // how long looked-up ports are trusted
	RouteTTL       time.Duration `yaml:"route_ttl"`       // how long NLM callback routes and known clients are kept
	MaxRecord      int           `yaml:"max_record_bytes"`
}

// FilerConfig says where the filer's auxiliary services are.
type FilerConfig struct {
	Address string `yaml:"address"` // host name or IP
	// RPCBindPort is asked for any program port left at 0 below.
	RPCBindPort int `yaml:"rpcbind_port"`
	MountPort   int `yaml:"mount_port"`
	NLMPort     int `yaml:"nlm_port"`
	NSMPort     int `yaml:"nsm_port"`
	// UDP forwards calls that arrived over UDP over UDP; off, they go
	// over TCP (for filers that serve MOUNT/NLM over TCP only).
	UDP bool `yaml:"udp"`
}

// DefaultConfig is the production configuration, off.
func DefaultConfig() Config {
	return Config{
		ListenAddress:     "0.0.0.0",
		RPCBindPort:       111,
		UDP:               true,
		NFSRDMAPort:       20049,
		Filer:             FilerConfig{RPCBindPort: 111, UDP: true},
		ClientRPCBindPort: 111,
		CallTimeout:       60 * time.Second,
		ConnectTimeout:    5 * time.Second,
		PortCacheTTL:      60 * time.Second,
		RouteTTL:          time.Hour,
		MaxRecord:         256 << 10,
	}
}

// FieldError is one invalid value; Field is its YAML path.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return "config: " + e.Field + ": " + e.Reason }

// Validate returns every problem found, joined (errors.As finds the first
// *FieldError). A disabled relay is always valid.
func (c *Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "aux_relay." + field, Reason: fmt.Sprintf(format, args...)})
	}
	c.validateListen(bad)
	c.validateFiler(bad)
	c.validateLimits(bad)
	return errors.Join(errs...)
}

// validateListen checks the relay's own addresses and ports, no two of
// its listeners on one port.
func (c *Config) validateListen(bad func(string, string, ...any)) {
	if net.ParseIP(c.ListenAddress) == nil {
		bad("listen_address", "must be an IP address (got %q)", c.ListenAddress)
	}
	if c.AdvertiseAddress != "" {
		if ip := net.ParseIP(c.AdvertiseAddress); ip == nil || ip.IsUnspecified() {
			bad("advertise_address", "must be a specific IP address (got %q)", c.AdvertiseAddress)
		}
	}
	if c.RPCBindPort != -1 {
		port(bad, "rpcbind_port", c.RPCBindPort, true)
	}
	port(bad, "mount_port", c.MountPort, true)
	port(bad, "nlm_port", c.NLMPort, true)
	port(bad, "nsm_port", c.NSMPort, true)
	port(bad, "nfs_rdma_port", c.NFSRDMAPort, true)
	port(bad, "nfs_tcp_port", c.NFSTCPPort, true)
	port(bad, "client_rpcbind_port", c.ClientRPCBindPort, false)
	seen := map[int]string{}
	for _, p := range []struct {
		name string
		port int
	}{{"rpcbind_port", c.RPCBindPort}, {"mount_port", c.MountPort}, {"nlm_port", c.NLMPort}, {"nsm_port", c.NSMPort}} {
		if p.port <= 0 {
			continue
		}
		if other, dup := seen[p.port]; dup {
			bad(p.name, "port %d is already %s", p.port, other)
		}
		seen[p.port] = p.name
	}
}

// validateFiler checks where the filer's auxiliary services are.
func (c *Config) validateFiler(bad func(string, string, ...any)) {
	if c.Filer.Address == "" {
		bad("filer.address", "must be set (the filer's host name or IP)")
	}
	port(bad, "filer.mount_port", c.Filer.MountPort, true)
	port(bad, "filer.nlm_port", c.Filer.NLMPort, true)
	port(bad, "filer.nsm_port", c.Filer.NSMPort, true)
	needRPCBind := c.Filer.MountPort == 0 || c.Filer.NLMPort == 0 || c.Filer.NSMPort == 0
	if needRPCBind || c.Filer.RPCBindPort != 0 {
		port(bad, "filer.rpcbind_port", c.Filer.RPCBindPort, false)
	}
}

// validateLimits checks the names, timeouts and record size.
func (c *Config) validateLimits(bad func(string, string, ...any)) {
	if len(c.NLMCallerName) > maxNLMString {
		bad("nlm_caller_name", "longer than %d bytes", maxNLMString)
	}
	if len(c.NotifyMonName) > maxNLMString {
		bad("notify_mon_name", "longer than %d bytes", maxNLMString)
	}
	dur(bad, "call_timeout", c.CallTimeout)
	dur(bad, "connect_timeout", c.ConnectTimeout)
	dur(bad, "port_cache_ttl", c.PortCacheTTL)
	dur(bad, "route_ttl", c.RouteTTL)
	if c.MaxRecord < 4096 || c.MaxRecord > 16<<20 {
		bad("max_record_bytes", "must be between 4096 and 16777216 (got %d)", c.MaxRecord)
	}
}

func port(bad func(string, string, ...any), field string, p int, zeroOK bool) {
	if (p == 0 && !zeroOK) || p < 0 || p > 65535 {
		if zeroOK {
			bad(field, "must be 0..65535 (got %d)", p)
		} else {
			bad(field, "must be 1..65535 (got %d)", p)
		}
	}
}

func dur(bad func(string, string, ...any), field string, d time.Duration) {
	if d < time.Millisecond {
		bad(field, "must be at least 1ms (got %v)", d)
	}
}
