package gateway

import (
	"math/bits"

	"github.com/rdmagw/rdmagw/ulb"
)

// What the gateway can carry, advertised to clients in place of the
// server's own transfer sizes when those are larger (ulb.CapLimits): the
// server's NFSv3 FSINFO rtmax/rtpref/wtmax/wtpref, NFSv4 maxread and
// maxwrite attributes and NFSv4.1 CREATE_SESSION fore channel sizes are
// lowered in the replies passing through, in both modes. A client that
// sizes its I/O from them never sends a call, or asks for a reply, the
// gateway cannot carry.

// carrySlack is the room a READ or WRITE's RPC and NFS headers (a
// COMPOUND's SEQUENCE, PUTFH, GETATTR included) take beside its payload.
const carrySlack = 4096

// CarryLimits is what one call and one reply through the gateway can
// hold, from the configuration: a READ or WRITE payload lands in one
// pool buffer (the largest class) and moves in one chunk
// (rdma.limits.max_chunk_bytes); in forward mode a reply record from the
// server is at most backend.max_reply_bytes, in reverse mode a call
// record from a client at most reverse.max_call_bytes. Payload sizes are
// rounded down to a power of two, as clients size their I/O.
func (c *Config) CarryLimits() ulb.IOLimits {
	largest := int64(0)
	if n := len(c.Pool.Classes); n > 0 {
		largest = int64(c.Pool.Classes[n-1])
	}
	payload := min(largest, int64(c.RDMA.Limits.MaxChunkBytes))
	read, write := payload, payload
	if c.Mode == "reverse" {
		write = min(write, int64(c.Reverse.MaxCallBytes)-carrySlack)
	} else {
		read = min(read, int64(c.Backend.MaxReplyBytes)-carrySlack)
	}
	read, write = pow2Floor(read), pow2Floor(write)
	return ulb.IOLimits{
		MaxRead: uint64(read), MaxWrite: uint64(write),
		MaxRequest: uint32(write + carrySlack), MaxResponse: uint32(read + carrySlack),
	}
}

// pow2Floor is the largest power of two not above v (at least 4096).
func pow2Floor(v int64) int64 {
	if v < 4096 {
		return 4096
	}
	return 1 << (63 - bits.LeadingZeros64(uint64(v)))
}
