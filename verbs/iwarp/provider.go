// Package iwarp is rdmagw's pure-Go RDMA provider: standard iWARP over
// ordinary TCP sockets. The bytes on the wire are MPA (RFC 5044, with the
// RFC 6581 enhanced connection setup), DDP (RFC 5041) and RDMAP
// (RFC 5040), so Wireshark's iwarp_mpa and iwarp_ddp_rdmap dissectors and
// other iWARP stacks understand them.
//
// One file per protocol concern: crc.go (CRC32c), mpa.go (MPA frames and
// FPDU framing), ddp.go (DDP headers), rdmap.go (opcodes, Read Request),
// terminate.go (Terminate messages and error codes), mr.go (PDs, MRs,
// STags), cq.go (completion queues), srq.go (receive queues), cm.go
// (connection setup), qp.go (the queue pair), tx.go and rx.go (the two
// goroutines of a connection), txinline.go (Config.TxMode: transmitting
// on the caller's goroutine when the connection is idle), rxplan.go (a
// large RDMA Read's Response read straight into the sink, several
// segments per system call).
//
// Semantics a user of verbs should know:
//
//   - Completions of Send and RDMA Write are reported when their placement
//     at the peer is proven: after each burst of them the provider issues a
//     zero-length RDMA Read (a legal RDMAP message, the same one RFC 6581
//     uses as its ready-to-receive message) and completes everything posted
//     before it when its response arrives, the way an InfiniBand HCA
//     completes on ACK. That is what lets a Write to a bad rkey complete
//     with StatusRemoteAccess and a Send to a peer without a receive with
//     StatusRNR, from the Terminate the peer sends. Config.CompleteOnTransmit
//     turns this off (completions when the bytes are handed to TCP, like
//     Linux siw; errors then only show as flushed work requests): no fence
//     goes out, and a Send or Write written inline (below) completes
//     inside PostSend, with no goroutine woken to write or complete it.
//   - There are no RNR retries: iWARP has none. A Send that finds no
//     receive posted makes the peer send a Terminate (DDP untagged buffer
//     error, "no buffer available"); the Send completes with StatusRNR and
//     the connection ends. ConnOptions.RNRRetry is ignored.
//   - Every protocol violation is answered with a Terminate carrying the
//     RFC 5040/5041/5044 layer, error type and code and the header of the
//     offending segment; the connection then closes, outstanding work
//     requests complete with StatusFlushed (the one the Terminate names
//     with the matching error status), Done closes and Err returns a
//     *TerminateError.
//   - A full CQ makes the connection wait for room (back-pressure) instead
//     of dropping completions.
//   - PostSend never waits for the peer. On an idle connection (nothing
//     awaiting an answer, the transmit goroutine parked, the work under
//     64 KiB) it writes the work itself with a non-blocking writev (what
//     the socket does not take at once is left to the transmit goroutine),
//     and the receive side answers RDMA Read Requests the same way: a
//     request/response exchange then costs no goroutine wake-up on either
//     side. With several requests in flight the connection's transmit
//     goroutine writes, gathering everything posted meanwhile into one
//     writev; except what a DirectCQ consumer posts while the receive
//     goroutine runs it, which that goroutine writes itself, in one round
//     before it next waits for the socket (no goroutine woken for it).
//     Config.TxMode chooses otherwise (TxGoroutine, TxGreedy).
//   - A TCP reset is seen when it comes, or at the latest a second later
//     when it came right behind the peer's last data (rxResetCheck).
//   - InitiatorDepth/ResponderResources of 0 mean the default of 16.
package iwarp

import (
	"net"
	"strconv"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// Config configures the provider. The zero value is the default.
type Config struct {
	// DisableCRC asks for no MPA CRCs (C=0). CRCs are still used when the
	// peer asks for them (RFC 5044: either side can require them).
	DisableCRC bool
	// MPARevision is 1 (RFC 5044) or 2 (RFC 6581 enhanced connection
	// setup: IRD/ORD exchange); 0 means 2.
	MPARevision int
	// PeerToPeer requests RFC 6581 peer-to-peer mode when dialing: the
	// initiator sends a zero-length RDMA Write or Read as ready-to-receive
	// message before the responder may send.
	PeerToPeer bool
	// MaxFPDU is the largest FPDU we send, framing included. 0 derives it
	// from the connection's TCP MSS (RFC 5044's MULPDU); it is capped at
	// what the 16-bit ULPDU_Length can say and at least 128.
	MaxFPDU int
	// HandshakeTimeout bounds the MPA exchange on accepted connections;
	// 0 means 10 seconds.
	HandshakeTimeout time.Duration
	// CompleteOnTransmit completes Sends and RDMA Writes when they are
	// written to TCP instead of when their placement is confirmed (see
	// the package documentation). An inline round (TxMode) completes what
	// it wrote before PostSend returns; what it leaves to the transmit
	// goroutine completes when the goroutine has written it.
	CompleteOnTransmit bool
	// TxMode says who writes a connection's queued work to TCP: by
	// default (TxIdleInline) the caller when the connection is idle, else
	// the connection's transmit goroutine.
	TxMode TxMode
}

const (
	defaultDepth     = 16
	defaultQueue     = 128
	defaultMaxSGE    = 16
	defaultHandshake = 10 * time.Second
	minFPDU          = 128
)

// TxMode says who writes a connection's queued work (txinline.go).
type TxMode uint8

const (
	// TxIdleInline, the default: the caller (PostSend; the receive side
	// answering RDMA Read Requests) writes the work itself with a
	// non-blocking writev when the connection is idle and not pipelined:
	// nothing awaiting an answer, the transmit goroutine parked (or only
	// carrying Read Responses), none of the last 8 posts finding it
	// otherwise, the round under 64 KiB. Otherwise the transmit goroutine
	// writes it, woken once, batching everything queued meanwhile. One
	// call at a time then costs no goroutine wake-up on either side (the
	// forward gateway: goroutine wake-ups per getattr 10.5 -> 7.1, go tool
	// trace), while with several in flight the goroutine batches as with
	// TxGoroutine (rdmagw bench -embedded: the same writev per getattr at
	// 8 in flight).
	TxIdleInline TxMode = iota
	// TxGoroutine: the transmit goroutine writes all work; PostSend and
	// the receive side only queue it and wake the goroutine.
	TxGoroutine
	// TxGreedy writes inline whenever the transmit goroutine is parked:
	// PostSend on a connection with nothing awaiting an answer, the
	// receive side after it answered RDMA Read Requests or took a fence's
	// answer (also carrying work others posted), up to 512 KiB a round. It
	// loses the goroutine's batching with several RPCs in flight (rdmagw
	// bench -embedded: 40% more writev per getattr at 8 in flight).
	TxGreedy
)

func (m TxMode) String() string {
	switch m {
	case TxIdleInline:
		return "idle-inline"
	case TxGoroutine:
		return "goroutine"
	case TxGreedy:
		return "greedy"
	}
	return "TxMode(" + strconv.Itoa(int(m)) + ")"
}

func init() { verbs.Register(New(Config{})) }

type provider struct{ cfg Config }

// New returns an iWARP provider with the given configuration. The package
// registers New(Config{}) under the name "iwarp".
func New(cfg Config) verbs.Provider {
	if cfg.MPARevision == 0 {
		cfg.MPARevision = 2
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = defaultHandshake
	}
	return &provider{cfg: cfg}
}

func (p *provider) Name() string { return "iwarp" }

// Open returns a software device. addr names the interface for Info and,
// when it is a specific IP, is the source address of the connections the
// device dials (as an RDMA device's address is); an unspecified or empty
// addr lets them use any.
func (p *provider) Open(addr string) (verbs.Device, error) {
	d := &device{cfg: p.cfg, mrs: make([]*mr, 1, 64), objs: make([]*mr, 1, 64), keys: make([]uint8, 1, 64)}
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		d.local = ip
	}
	d.info = verbs.DeviceInfo{Name: "iwarp-go", Provider: "iwarp", Transport: "iWARP", Netdevs: netdevsFor(addr)}
	return d, nil
}

// netdevsFor names the interfaces holding addr's IP (all up interfaces for
// "" or an unspecified address).
func netdevsFor(addr string) []string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var names []string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		if ip == nil || ip.IsUnspecified() {
			names = append(names, ifc.Name)
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				names = append(names, ifc.Name)
			}
		}
	}
	return names
}
