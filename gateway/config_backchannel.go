package gateway

import (
	"time"

	"github.com/rdmagw/rdmagw/rdmarpc"
)

// BackchannelConfig is the backchannel section of Config
// (`backchannel:`, forward mode; configs/forward.yaml documents it).
type BackchannelConfig struct {
	// Disabled turns the backchannel off: backward replies from clients
	// are then treated as malformed calls and callbacks from the server
	// are answered SYSTEM_ERR (counted with reason "disabled").
	Disabled bool `yaml:"disabled"`
	// MaxCalls bounds the callbacks outstanding per client, whatever the
	// client grants (default 8; Linux clients grant 16). Each is one more
	// receive buffer posted on the client's connection.
	MaxCalls int `yaml:"max_calls"`
	// Queue is how many callbacks may wait for a credit per client
	// (default 64); beyond it a callback is answered SYSTEM_ERR.
	Queue int `yaml:"queue"`
	// Timeout is how long a callback waits for the client's reply before
	// its credit is taken back (default 2m).
	Timeout time.Duration `yaml:"timeout"`
}

// Defaults and bounds of the backchannel section.
const (
	DefaultBackchannelCalls   = 8
	DefaultBackchannelQueue   = 64
	DefaultBackchannelTimeout = 2 * time.Minute
	MaxBackchannelCalls       = 256
	MaxBackchannelQueue       = 4096
)

// WithDefaults fills in zero fields (for Configs built in code rather
// than parsed, which Validate would refuse).
func (c BackchannelConfig) WithDefaults() BackchannelConfig {
	if c.MaxCalls <= 0 {
		c.MaxCalls = DefaultBackchannelCalls
	}
	if c.Queue <= 0 {
		c.Queue = DefaultBackchannelQueue
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultBackchannelTimeout
	}
	return c
}

// DefaultBackchannel is the backchannel section of DefaultConfig.
var DefaultBackchannel = BackchannelConfig{}.WithDefaults()

// ResponderBackchannel is the engine's side of the section, for
// rdmarpc.ResponderConfig.Backchannel of each client connection: the
// callbacks outstanding (and receives posted for their replies) and how
// long one may wait for its reply. Disabled posts no receives for it.
func (c *Config) ResponderBackchannel() rdmarpc.ResponderBackchannel {
	b := c.Backchannel.WithDefaults()
	if b.Disabled {
		return rdmarpc.ResponderBackchannel{MaxCalls: -1}
	}
	return rdmarpc.ResponderBackchannel{MaxCalls: b.MaxCalls, Timeout: b.Timeout}
}
