package verbs

import (
	"context"
	"net"
	"time"
)

// Provider opens devices. Providers register themselves by name (see
// Register) so configuration can say `provider: iwarp` or `ibverbs`.
type Provider interface {
	Name() string
	// Open returns the device that serves the local address addr ("" or
	// an unspecified IP: the provider's default device). For ibverbs this
	// maps the address's netdev to its RDMA device.
	Open(addr string) (Device, error)
}

// DeviceInfo describes a device for `rdmagw devices` and logs.
type DeviceInfo struct {
	Name      string   // e.g. "rxe0", "mlx5_0", "iwarp-go"
	Provider  string   // provider name
	Netdevs   []string // associated network interfaces
	Transport string   // "iWARP", "InfiniBand", "RoCE"
}

// Device is one RDMA device (a NIC port, or the pure-Go software device).
type Device interface {
	Info() DeviceInfo
	AllocPD() (PD, error)
	// CreateCQ creates a completion queue with room for depth entries.
	CreateCQ(depth int) (CQ, error)
	// Listen starts accepting connection requests on addr ("ip:port").
	Listen(addr string) (Listener, error)
	// Dial connects to a listener at addr, carrying opts.PrivateData in
	// the connect request. A rejection is a *RejectError.
	Dial(ctx context.Context, addr string, opts ConnOptions) (Conn, error)
	Close() error
}

// Access flags of a memory region.
type Access uint32

const (
	AccessLocalWrite  Access = 1 << iota // the local HCA may write (Receive, RDMA Read target)
	AccessRemoteRead                     // peers may RDMA Read it with the rkey
	AccessRemoteWrite                    // peers may RDMA Write it with the rkey
)

// PD is a protection domain: MRs, SRQs and Conns in one PD may be used
// together, and only together.
type PD interface {
	// Register registers buf, which must not move (see Alloc), with the
	// given access. Remote access is keyed by MR.RKey and offsets from
	// MR.Addr.
	Register(buf []byte, access Access) (MR, error)
	// CreateSRQ creates a shared receive queue of depth entries.
	CreateSRQ(depth int) (SRQ, error)
	Close() error
}

// MR is a registered memory region.
type MR interface {
	// Bytes is the registered memory.
	Bytes() []byte
	// LKey names the region in local scatter/gather entries.
	LKey() uint32
	// RKey names the region to peers; zero when the region has no remote
	// access.
	RKey() uint32
	// Addr is the address a peer uses in RDMA operations for Bytes()[0]
	// (the region's IOVA; peers address offset o as Addr()+o).
	Addr() uint64
	// Invalidate makes the rkey unusable by any peer from now on (an RDMA
	// access with it then fails with a remote access error). Local use
	// stays valid. Invalidating twice is not an error. A peer can do the
	// same with Send with Invalidate, but only where the provider supports
	// remote invalidation of its regions: the pure-Go provider does; the
	// ibverbs provider does not (ibv_reg_mr memory is neither a memory
	// window nor a fast-registration MR, so rxe and mlx5 fail such a Send
	// at the receiver with StatusRemoteInvalidReq and break the
	// connection; verbstest.Quirks.NoRemoteInvalidate). RPC-over-RDMA
	// must therefore not advertise "Send With Invalidate OK" (RFC 8797
	// private data) on such a provider: rdmarpc never does.
	Invalidate() error
	// Valid reports whether the rkey is still valid.
	Valid() bool
	// Deregister releases the region; its keys die with it.
	Deregister() error
}

// SGE is one scatter/gather element: Buf must lie inside a region
// registered on the same PD under LKey, or the work request completes with
// StatusLocalProtection.
type SGE struct {
	Buf  []byte
	LKey uint32
}

// Opcode of a work request or completion.
type Opcode uint8

const (
	OpSend      Opcode = iota + 1
	OpSendInv          // Send with Invalidate: invalidates InvalidateRKey at the receiver
	OpRDMAWrite        // write SGL into the peer's RemoteAddr/RKey
	OpRDMARead         // read the peer's RemoteAddr/RKey into SGL
	OpRecv             // completion of a receive
	OpLocalInv         // completion of a local invalidation (provider-internal)
)

func (o Opcode) String() string {
	switch o {
	case OpSend:
		return "SEND"
	case OpSendInv:
		return "SEND_INV"
	case OpRDMAWrite:
		return "RDMA_WRITE"
	case OpRDMARead:
		return "RDMA_READ"
	case OpRecv:
		return "RECV"
	case OpLocalInv:
		return "LOCAL_INV"
	}
	return "UNKNOWN"
}

// SendWR is a send-queue work request. Chains (Next) are posted in order
// with one call; the provider does not keep the WR after PostSend returns
// (it may keep SGL buffers referenced until completion, like a NIC).
type SendWR struct {
	ID     uint64 // returned in the completion: the poster's context, no map lookup needed
	Op     Opcode
	SGL    []SGE
	Signal bool // generate a completion on success (errors always complete)
	// RDMA Write / Read target in the peer's memory.
	RemoteAddr uint64
	RKey       uint32
	// InvalidateRKey is the peer's rkey that OpSendInv invalidates.
	InvalidateRKey uint32
	Next           *SendWR
}

// RecvWR is a receive-queue work request.
type RecvWR struct {
	ID   uint64
	SGL  []SGE
	Next *RecvWR
}

// Status of a completion. The values are the errors a real HCA reports.
type Status uint8

const (
	StatusSuccess          Status = iota
	StatusLocalLength             // a received message did not fit the posted receive buffer
	StatusLocalProtection         // an SGE is outside its region or the lkey is wrong
	StatusRemoteAccess            // bad rkey, out of bounds, or no access right at the peer
	StatusRemoteOp                // the peer failed the operation (e.g. it sent a Terminate)
	StatusRNR                     // receiver not ready: no receive posted at the peer (retries exhausted)
	StatusFlushed                 // the queue pair left RTS (disconnect, error) before this WR ran
	StatusRemoteInvalidReq        // the peer rejected the request as invalid
	StatusGeneral                 // anything else (transport failure, retry exceeded)
)

var statusNames = [...]string{"success", "local length error", "local protection error",
	"remote access error", "remote operation error", "receiver not ready", "flushed",
	"remote invalid request", "general error"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown status"
}

// WC is a work completion.
type WC struct {
	ID     uint64
	Op     Opcode
	Status Status
	// ByteLen: bytes received (OpRecv) or transferred.
	ByteLen int
	// Invalidated is set on OpRecv when the sender used Send with
	// Invalidate; InvalidatedRKey is the local rkey it invalidated.
	Invalidated     bool
	InvalidatedRKey uint32
	// Conn is the connection the completion belongs to (on an SRQ's CQ,
	// the one whose peer sent the message). Providers return the same
	// value that Dial/Accept returned.
	Conn Conn
}

// CQ is a completion queue. Poll and Wait may be called from one goroutine
// at a time; completions are delivered in the order the queue saw them.
type CQ interface {
	// Poll moves up to len(wcs) completions into wcs and returns how many.
	Poll(wcs []WC) int
	// Wait blocks until at least one completion is ready, the context is
	// done, or the CQ is closed (ErrClosed). It parks the goroutine: no
	// busy loop.
	Wait(ctx context.Context) error
	Close() error
}

// DirectCQ is a CQ whose provider can run the consumer on the provider's
// own goroutine (run to completion), instead of waking a goroutine parked
// in Wait, once per batch of completions it added: one small RPC's
// completions are then handled without a goroutine switch. It is
// optional; a consumer must work with a plain CQ (Poll and Wait alone).
type DirectCQ interface {
	CQ
	// SetDirect installs consume; nil removes it (a consume already
	// running may still finish). After adding completions the provider
	// calls consume at a point where it holds none of its own locks and
	// is not inside a Post* call of the consumer's, on a goroutine of its
	// own (one that reads the wire or transmits). consume returns true if
	// it consumed: it polled the CQ until Poll returned 0, after it was
	// called. It returns false to decline (its owner is busy with the CQ,
	// or ending): the provider then wakes Wait as without consume.
	// Completions added in other ways (inside a Post*, at the end of a
	// connection) wake Wait as usual.
	//
	// consume runs on the goroutine that delivers this CQ's completions,
	// reads the peer's messages and transmits: while it runs, none of
	// that happens. So it must never block: no wait for a completion
	// (an RDMA Read's, a Send's), a pool's memory, room in a send queue,
	// a lock held across such a wait, Wait on this CQ, or Close of a
	// queue pair (which waits for these goroutines). Poll, Post* (they
	// never block; a full queue is ErrQueueFull), Disconnect and short
	// non-blocking work are fine. Work that would block is handed to the
	// consumer's own goroutine. A provider may call consume from several
	// goroutines at once: consume serialises itself with its owner's
	// polling (a TryLock that declines when taken).
	SetDirect(consume func() bool)
}

// PostSettledCQ is a DirectCQ whose consumer can also take the
// completions its own Post* calls add. A provider that completes a Send
// or RDMA Write as it writes it (iwarp with CompleteOnTransmit, as Linux
// siw does) adds that completion inside PostSend; woken there, the
// goroutine parked in Wait runs on another core only to take it. With
// the consumer's promise to Settle after its posts, the provider leaves
// that wake-up to the poster's Settle, which runs consume on the
// poster's goroutine.
type PostSettledCQ interface {
	DirectCQ
	// SettlePosts(true) is the consumer's promise: after each Post* on a
	// connection whose completions come here returns, it calls Settle,
	// holding no lock consume takes. Inside consume (where consume's own
	// polling takes what the post added) Settle is harmless. SettlePosts
	// (false) withdraws the promise and settles what is owed.
	SettlePosts(on bool)
	// Settle takes the completions a post left to it: with consume it
	// runs consume on the calling goroutine (waking Wait if consume
	// declines); without, it wakes Wait, for a consumer busy with more
	// work that would rather take several posts' completions at once.
	// With none left it returns at once.
	Settle(consume bool)
}

// SRQ is a shared receive queue: receives posted here serve every Conn
// created with it.
type SRQ interface {
	PostRecv(wr *RecvWR) error
	Close() error
}

// ConnOptions configure the queue pair of a dialed or accepted Conn.
type ConnOptions struct {
	PD     PD // required
	SendCQ CQ // required
	RecvCQ CQ // required (may be the same as SendCQ)
	SRQ    SRQ
	// Queue sizes; a post beyond them fails with ErrQueueFull.
	MaxSendWR, MaxRecvWR int
	MaxSGE               int
	// Responder resources: RDMA Reads the peer may have outstanding
	// against us (IRD), and that we may have outstanding against the peer
	// (ORD). Negotiated as the minimum of both sides' values.
	InitiatorDepth, ResponderResources int
	// PrivateData travels in the connect request (Dial) or accept reply.
	PrivateData []byte
	// InitialRecv is a chain of receives posted on the new queue pair
	// before the connection is established, so the peer's first message
	// always finds a buffer (iWARP has no RNR retry, and the Linux
	// NFS/RDMA client sends at once with rnr_retry 0). Ignored with an
	// SRQ, whose receives are posted beforehand.
	InitialRecv *RecvWR
	// RNRRetry: how many times a Send is retried against a peer with no
	// receive posted before failing with StatusRNR (7 = infinite on real
	// hardware; providers may cap).
	RNRRetry int
	// Timeout bounds connection setup.
	Timeout time.Duration
}

// Listener yields connection requests.
type Listener interface {
	// Accept waits for the next connection request.
	Accept(ctx context.Context) (ConnRequest, error)
	Addr() net.Addr
	Close() error
}

// ConnRequest is a peer's connect request, not yet answered.
type ConnRequest interface {
	PrivateData() []byte // the peer's private data (e.g. RFC 8797)
	RemoteAddr() net.Addr
	LocalAddr() net.Addr
	// Accept creates the queue pair and completes the connection, sending
	// opts.PrivateData in the reply.
	Accept(opts ConnOptions) (Conn, error)
	// Reject refuses the request, carrying privateData to the peer.
	Reject(privateData []byte) error
}

// Conn is an established reliable connection: a queue pair and its
// connection-manager identity.
type Conn interface {
	// PrivateData is what the peer sent in its connect request (accepted
	// side) or in its accept reply (dialing side).
	PrivateData() []byte
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
	// PostSend posts a chain of send work requests. ErrQueueFull when the
	// send queue has no room for the whole chain (nothing is posted);
	// ErrNotConnected after a disconnect.
	PostSend(wr *SendWR) error
	// PostRecv posts receives on this Conn's own receive queue; it fails
	// with ErrSRQ when the Conn uses an SRQ.
	PostRecv(wr *RecvWR) error
	// Disconnect starts an orderly disconnect; outstanding work requests
	// complete with StatusFlushed and Done is closed.
	Disconnect() error
	// Done is closed when the connection has ended, for any reason; Err
	// then says why (nil after a local Disconnect).
	Done() <-chan struct{}
	Err() error
	// Close disconnects if needed and releases the queue pair.
	Close() error
}
