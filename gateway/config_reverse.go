package gateway

import (
	"net"
	"time"

	"github.com/rdmagw/rdmagw/ulb"
)

// validateReverse checks the fields only reverse mode reads.
func (c *Config) validateReverse(bad func(field, format string, args ...any)) {
	b := &c.Backend
	switch b.Provider {
	case "iwarp", "ibverbs":
	default:
		bad("backend.provider", `must be "iwarp" or "ibverbs" (got %q)`, b.Provider)
	}
	if net.ParseIP(b.LocalAddress) == nil {
		bad("backend.local_address", "must be an IP address (got %q)", b.LocalAddress)
	}
	r := &c.Reverse
	// More calls per client than credits would only queue at the
	// requester; 4096 is the credit ceiling.
	if r.MaxCallsPerClient < 1 || r.MaxCallsPerClient > 4096 {
		bad("reverse.max_calls_per_client", "must be between 1 and 4096 (got %d)", r.MaxCallsPerClient)
	}
	if r.PingInterval < 0 {
		bad("reverse.ping_interval", "must be 0 (off) or a positive duration (got %v)", r.PingInterval)
	}
	if r.PingInterval > 0 && r.PingTimeout <= time.Millisecond {
		bad("reverse.ping_timeout", "must be more than 1ms (got %v)", r.PingTimeout)
	}
	if r.MaxCallBytes < 4096 || r.MaxCallBytes > 1<<30 {
		bad("reverse.max_call_bytes", "must be between 4KiB and 1GiB (got %d)", r.MaxCallBytes)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"reverse.max_read_chunks", r.MaxReadChunks}, {"reverse.max_write_chunks", r.MaxWriteChunks}} {
		if f.v < 1 || f.v > ulb.MaxItems {
			bad(f.name, "must be between 1 and %d (got %d)", ulb.MaxItems, f.v)
		}
	}
	if r.ReplyChunkRetries < 0 || r.ReplyChunkRetries > 8 {
		bad("reverse.reply_chunk_retries", "must be between 0 and 8 (got %d)", r.ReplyChunkRetries)
	}
}
