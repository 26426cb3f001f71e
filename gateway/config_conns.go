package gateway

import (
	"time"
)

// ConnectionsConfig (forward mode) gives every RDMA client a fair share of
// the gateway: how many connections it takes, how much registered memory
// one connection may hold, and when a connection that does nothing, or
// takes no replies, is closed. configs/forward.yaml says why each default
// is what it is.
type ConnectionsConfig struct {
	// Max is the most RDMA client connections at once; more are refused
	// (rdmagw_connections_rejected_total{reason="too_many"}).
	Max int `yaml:"max"`
	// MaxPerAddress is the most connections from one client IP address
	// (reason "too_many_from_address"). 0: no limit of its own.
	MaxPerAddress int `yaml:"max_per_address"`
	// IdleTimeout closes a connection on which no call has arrived for
	// this long and none is outstanding (reason "idle"). 0: never.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// ReplyTimeout closes a connection whose client has not taken a
	// reply for this long (reason "reply_timeout"). 0: never.
	ReplyTimeout time.Duration `yaml:"reply_timeout"`
	// MaxCallMemory is the pool memory one connection's calls may hold
	// for their Read chunks (WRITE payloads, Long Calls) at once; a call
	// beyond it waits, and the client with it, until earlier calls are
	// answered.
	MaxCallMemory ByteSize `yaml:"max_call_memory"`
	// MaxReplyMemory is the pool memory one connection's replies may hold
	// at once (READ payloads being received from the server or sent to
	// the client); beyond it the connection's backend reads wait.
	MaxReplyMemory ByteSize `yaml:"max_reply_memory"`
}

// Defaults of the connections section.
const (
	DefaultMaxConnections = 1024
	DefaultMaxPerAddress  = 64
	DefaultIdleTimeout    = 10 * time.Minute
	DefaultReplyTimeout   = 30 * time.Second
	DefaultMaxCallMemory  = 32 << 20
	DefaultMaxReplyMemory = 32 << 20
)

// DefaultConnections is the connections section of DefaultConfig.
var DefaultConnections = ConnectionsConfig{
	Max:            DefaultMaxConnections,
	MaxPerAddress:  DefaultMaxPerAddress,
	IdleTimeout:    DefaultIdleTimeout,
	ReplyTimeout:   DefaultReplyTimeout,
	MaxCallMemory:  DefaultMaxCallMemory,
	MaxReplyMemory: DefaultMaxReplyMemory,
}

func (c *Config) validateConnections(bad func(string, string, ...any)) {
	n := &c.Connections
	if n.Max < 1 || n.Max > 1<<20 {
		bad("connections.max", "must be between 1 and 1048576 (got %d)", n.Max)
	}
	if n.MaxPerAddress < 0 {
		bad("connections.max_per_address", "must be 0 (no limit) or more (got %d)", n.MaxPerAddress)
	}
	if n.IdleTimeout < 0 {
		bad("connections.idle_timeout", "must be 0 (never) or positive (got %v)", n.IdleTimeout)
	}
	if n.ReplyTimeout < 0 {
		bad("connections.reply_timeout", "must be 0 (never) or positive (got %v)", n.ReplyTimeout)
	}
	if n.MaxCallMemory < 0 {
		bad("connections.max_call_memory", "must not be negative (got %v)", n.MaxCallMemory)
	}
	if n.MaxReplyMemory < 0 {
		bad("connections.max_reply_memory", "must not be negative (got %v)", n.MaxReplyMemory)
	}
}
