// Package verbstest is the conformance suite every verbs provider must
// pass. It is written only against the verbs interfaces, so the pure-Go
// iWARP provider and the libibverbs provider (soft-RoCE in the lab, real
// NICs on hardware) are held to one contract.
//
// A provider's test calls Run:
//
//	func TestConformance(t *testing.T) {
//		verbstest.Run(t, verbstest.Factory{Provider: iwarp.New()})
//	}
//
// The environment variables RDMAGW_VERBS_ADDR (listen address, e.g. the
// rxe interface's IP) and RDMAGW_VERBS_CONNS (connections opened at once by
// the many-connections case) override the Factory, so one test binary can
// run unchanged on a developer machine and in the lab VM.
//
// Every case opens its own devices and cleans up after itself, and fails
// if goroutines are left behind.
package verbstest

import (
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// Environment variables that override a Factory.
const (
	EnvAddr  = "RDMAGW_VERBS_ADDR"
	EnvConns = "RDMAGW_VERBS_CONNS"
)

// Factory describes the provider under test.
type Factory struct {
	// Provider is the provider under test.
	Provider verbs.Provider
	// Peer, if set, is the provider of every case's client host (the
	// dialing side), so two providers are tested against each other on
	// one wire (interop: the pure-Go iWARP provider and a kernel iWARP
	// device through ibverbs). Quirks then describe the pair. Default:
	// Provider at both ends.
	Peer verbs.Provider
	// Addr is the address listeners bind ("ip:0" for an ephemeral
	// port); both ends open the device that serves its IP. Default
	// "127.0.0.1:0"; RDMAGW_VERBS_ADDR overrides it (an IP without a port
	// gets ":0").
	Addr string
	// Conns is how many connections the many-connections case runs at
	// once. Default 64; RDMAGW_VERBS_CONNS overrides it.
	Conns int
	// Timeout bounds each expected completion, connection setup and
	// disconnect. Default 20s (the lab runs under QEMU without KVM).
	Timeout time.Duration
	// RNRRetry is the ConnOptions.RNRRetry of the sender in the RNR
	// case: how often a Send to a peer without a posted receive is
	// retried before it fails. Default 1, so the case ends quickly even
	// where each retry waits for the RNR timer (soft-RoCE).
	RNRRetry int
	// Tune, if set, adjusts the ConnOptions of every connection the suite
	// makes, before a case applies its own changes (queue depths, RDMA
	// Read depths a device caps lower, connection timeouts).
	Tune func(o *verbs.ConnOptions)
	// Quirks lists where the provider legitimately differs from the
	// InfiniBand behaviour the suite expects by default.
	Quirks Quirks
}

// Quirks are provider behaviours that real RDMA transports differ on. Each
// one relaxes a check to what the transport's own specification demands.
type Quirks struct {
	// PrivateDataPadded: the connection manager delivers private data
	// padded with zeros to the fixed size of the CM message (InfiniBand CM
	// through librdmacm: 56 bytes in a REQ, 196 in a REP, 148 in a REJ).
	// The suite then checks that what was sent is a prefix followed only
	// by zero bytes, instead of an exact match.
	PrivateDataPadded bool
	// NoRNRRetry: the transport has no receiver-not-ready retry. In iWARP
	// (RFC 5040 section 7.1, RFC 5041 section 7.2) an untagged message that
	// finds no posted receive is a fatal DDP error: the data sink sends a
	// Terminate and the connection ends. The RNR case then accepts either
	// StatusRNR at the sender or the connection ending on both sides, and
	// skips the "late receive is retried" check.
	NoRNRRetry bool
	// RNRRetryExceeded: when receiver-not-ready retries run out the
	// device reports a transport retry error (StatusGeneral) instead of
	// StatusRNR, as some soft-RoCE versions do. The RNR case then accepts
	// either status.
	RNRRetryExceeded bool
	// NoZeroLengthRDMA skips zero-length RDMA Write and Read (legal in
	// both InfiniBand and RFC 5040, but some devices refuse them).
	NoZeroLengthRDMA bool
	// NoRemoteInvalidate: the provider's regions (ibv_reg_mr memory) cannot
	// be invalidated by a peer. InfiniBand allows remote invalidation only
	// of memory windows and fast-registration MRs, so on rxe and mlx5 a
	// Send with Invalidate naming a plain MR's rkey fails at the receiver:
	// its receive completes with StatusRemoteInvalidReq and its queue pair
	// is broken. The Send/Invalidate case then expects exactly that.
	NoRemoteInvalidate bool
	// InvalidateUnreported: the listener side invalidates the rkey a Send
	// with Invalidate names but its receive completion does not say so
	// (Linux siw through libsiw: copy_cqe clears wc_flags, so user space
	// never sees IBV_WC_WITH_INV). The Send/Invalidate case then accepts
	// a completion without the invalidated rkey and skips the MR.Valid
	// check (the provider cannot know).
	InvalidateUnreported bool
	// MaxReadSGE: the dialer side's device scatters an RDMA Read into at
	// most this many SGEs (siw: max_sge_rd 1; 0: no limit of its own).
	// The scattered Read then expects ErrInvalidSGE at post instead.
	MaxReadSGE int
	// CompleteOnTransmit: the dialer side completes Sends and RDMA Writes
	// when they are handed to TCP and an RDMA Read when its response
	// arrives (Linux siw), not when the peer has placed them. A Write
	// completes before a Read posted ahead of it, so the ordering checks
	// of the pipeline and disconnect cases accept any order of the ids.
	CompleteOnTransmit bool
	// ReadPermissionUnchecked: the listener side answers an RDMA Read of
	// a region registered without remote-read access (Linux siw 6.1:
	// siw_qp_sq_proc_tx checks a Read Response's source with no required
	// permission). The Read-without-permission access cases skip.
	ReadPermissionUnchecked bool
	// SlowDialAbort: a Dial whose context ends while the peer has not
	// answered the connection request returns only when the transport's
	// own connect timeout ends (the kernel iw_cm on siw: the MPA Reply
	// timeout); the deadline case then only logs how long it took.
	SlowDialAbort bool
}

// config is a Factory with defaults and environment overrides applied.
type config struct {
	Factory
	host string // the IP part of Addr, handed to Provider.Open
}

func resolve(f Factory) config {
	c := config{Factory: f}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if v := os.Getenv(EnvAddr); v != "" {
		c.Addr = v
		if _, _, err := net.SplitHostPort(v); err != nil {
			c.Addr = net.JoinHostPort(v, "0")
		}
	}
	if c.Conns <= 0 {
		c.Conns = 64
	}
	if v := os.Getenv(EnvConns); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			c.Conns = n
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = 20 * time.Second
	}
	if c.RNRRetry <= 0 {
		c.RNRRetry = 1
	}
	c.host = c.Addr
	if h, _, err := net.SplitHostPort(c.Addr); err == nil {
		c.host = h
	}
	return c
}

// Run runs the whole suite against f's provider as subtests of t. Subtests
// run one after another: the goroutine leak check compares counts.
func Run(t *testing.T, f Factory) {
	if f.Provider == nil {
		t.Fatal("verbstest: Factory.Provider is nil")
	}
	c := resolve(f)
	t.Logf("verbstest: provider %q, listen address %s, %d concurrent connections", c.Provider.Name(), c.Addr, c.Conns)
	if c.Peer != nil {
		t.Logf("verbstest: client side (dialer) on provider %q", c.Peer.Name())
	}
	// Providers may start process-wide goroutines on first use; one
	// connection before the first baseline keeps them out of the count.
	warmUp(t, c)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, c) })
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, c config)
}

var cases = []testCase{
	{"Connect/PrivateData", testConnectPrivateData},
	{"Connect/Addresses", testConnectAddresses},
	{"Connect/Reject", testReject},
	{"Connect/DialClosedPort", testDialClosedPort},
	{"Connect/DialContextDeadline", testDialContextDeadline},
	{"Connect/AcceptContextCancel", testAcceptContextCancel},
	{"Send/Ordering", testSendOrdering},
	{"Send/Unsignalled", testUnsignalled},
	{"Send/ScatterGather", testSendScatterGather},
	{"Send/Chain", testChain},
	{"Send/Invalidate", testSendInvalidate},
	{"Send/RNR", testRNR},
	{"Send/RNRRetryRecovers", testRNRRetryRecovers},
	{"Send/ReceiveTooSmall", testReceiveTooSmall},
	{"RDMA/Sizes", testRDMASizes},
	{"RDMA/ScatterGather", testRDMAScatterGather},
	{"RDMA/ToDialer", testRDMAToDialer},
	{"RDMA/Pipeline", testRDMAPipeline},
	{"RDMA/WriteThenSend", testRDMAWriteThenSend},
	{"Access/Remote", testRemoteAccess},
	{"Access/Reregister", testReregister},
	{"Access/Local", testLocalProtection},
	{"Lifecycle/Disconnect", testDisconnect},
	{"Lifecycle/CloseWithoutDisconnect", testCloseWithoutDisconnect},
	{"Lifecycle/DisconnectDuringTransfer", testDisconnectDuringTransfer},
	{"Lifecycle/ListenerCloseKeepsConns", testListenerCloseKeepsConns},
	{"Lifecycle/QueueFull", testQueueFull},
	{"Lifecycle/DeregisterInFlight", testDeregisterInFlight},
	{"CQ/Wait", testCQWait},
	{"SRQ/SharedByEight", testSRQ},
	{"Scale/ManyConnections", testManyConnections},
}
