// Package verbs is rdmagw's RDMA abstraction: exactly the operations
// RPC-over-RDMA needs, and nothing the gateway does not use.
//
// The model is the InfiniBand verbs model that every RDMA stack shares:
//
//	Provider ── Open(local addr) ──> Device
//	Device   ── AllocPD, CreateCQ, Listen, Dial
//	PD       ── Register(memory) ──> MR (lkey, rkey, invalidation)
//	         ── CreateSRQ ──> SRQ (receive buffers shared by many conns)
//	Conn     ── a reliable-connected queue pair plus its CM identity:
//	            PostSend (Send, Send with Invalidate, RDMA Write, RDMA Read;
//	            chained with Next), PostRecv, Disconnect
//	CQ       ── Poll(batch) and a blocking Wait that parks the goroutine
//	DirectCQ ── optional: SetDirect, the consumer run on the provider's
//	            goroutine after a batch of completions (no wake-up)
//
// Two providers implement it: verbs/iwarp, pure Go, standard iWARP
// (MPA/DDP/RDMAP) over TCP sockets, the default; and verbs/ibverbs, cgo over
// libibverbs and librdmacm (build tag ibverbs), for InfiniBand, RoCE, iWARP
// NICs and soft-RoCE. verbs/verbstest is one conformance suite run against
// both.
//
// Memory handed to an MR must not move: use Alloc (mmap, outside the Go
// heap) for anything registered.
package verbs
