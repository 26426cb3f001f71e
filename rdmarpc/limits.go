package rdmarpc

// Limits bound what a decoded header may ask of the receiver. A header
// arrives in one inline buffer, so its size already bounds the number of
// segments (24 bytes each in the Read list, 16 in a Write or Reply chunk);
// Limits add a policy on top: how many RDMA operations one message may
// demand and how many bytes one chunk may move. A header over a limit is
// answered with ERR_CHUNK.
//
// A zero field means "use the default"; Limits{} is the default set.
type Limits struct {
	// MaxReadSegments bounds the Read list as a whole (all chunks).
	MaxReadSegments int
	// MaxReadChunks bounds the number of distinct Positions in the Read
	// list, the Position-Zero Read chunk included.
	MaxReadChunks int
	// MaxWriteChunks bounds the number of Write chunks in the Write list.
	MaxWriteChunks int
	// MaxSegmentsPerChunk bounds any one Read, Write or Reply chunk.
	MaxSegmentsPerChunk int
	// MaxChunkBytes bounds the sum of the segment lengths of any one Read,
	// Write or Reply chunk.
	MaxChunkBytes uint64
}

// Default limits. Why these values:
//
//   - The Linux client puts at most RPCRDMA_MAX_HDR_SEGS segments in one
//     chunk list (8 in older kernels, 16 today) and never more than one
//     Read chunk (a payload chunk or the Position-Zero chunk) and one Write
//     chunk. The defaults leave room for other requesters (a Solaris or
//     libnfs client gathering a Long call from many pages) yet stay far
//     below what fits in a 4 KiB header (about 170 Read segments).
//   - NFSv4 COMPOUNDs may carry several READs, each with its own Write
//     chunk (RFC 8267 section 4.3), so MaxWriteChunks is 8, not 1.
//   - 8 MiB per chunk covers the largest NFS READ/WRITE payload Linux
//     negotiates (4 MiB with recent kernels, 1 MiB with older ones) plus
//     a Position-Zero Read chunk or Reply chunk carrying such a payload
//     with its RPC header, with room to spare.
const (
	DefaultMaxReadSegments     = 64
	DefaultMaxReadChunks       = 16
	DefaultMaxWriteChunks      = 8
	DefaultMaxSegmentsPerChunk = 64
	DefaultMaxChunkBytes       = 8 << 20
)

// DefaultLimits returns the default limits with every field filled in.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

// withDefaults fills in zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxReadSegments <= 0 {
		l.MaxReadSegments = DefaultMaxReadSegments
	}
	if l.MaxReadChunks <= 0 {
		l.MaxReadChunks = DefaultMaxReadChunks
	}
	if l.MaxWriteChunks <= 0 {
		l.MaxWriteChunks = DefaultMaxWriteChunks
	}
	if l.MaxSegmentsPerChunk <= 0 {
		l.MaxSegmentsPerChunk = DefaultMaxSegmentsPerChunk
	}
	if l.MaxChunkBytes == 0 {
		l.MaxChunkBytes = DefaultMaxChunkBytes
	}
	return l
}
