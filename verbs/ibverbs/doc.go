// Package ibverbs is rdmagw's provider over rdma-core: libibverbs for the
// data path and librdmacm for connection management, through cgo. It
// serves InfiniBand, RoCE and iWARP NICs and the kernel's soft-RoCE (rxe).
// The code builds only with the build tag ibverbs (and cgo); without it the
// package is this comment alone, so CGO_ENABLED=0 builds stay pure Go.
//
// One file per concern: provider.go (registration, device discovery with
// rdmamap), device.go (the verbs context), events.go (the rdma_cm event
// channel serviced by the Go runtime poller), cm.go (listen, dial, accept,
// reject), qp.go (the connection's queue pair and work request posting),
// post.go (who calls ibv_post_send: the caller, or the connection's poster
// goroutine for chains of 4 KiB or more on rxe), queue.go (the Go side of
// send and receive queues: id rings, C work request arrays),
// cq.go (completion queues and their channels), pd.go, mr.go, srq.go,
// errors.go (status and errno mapping), shim.c (small C helpers: one cgo
// call per post, poll or event).
//
// Semantics a user of verbs should know:
//
//   - No OS thread ever blocks in librdmacm or libibverbs waiting for
//     something: the rdma_cm event channel and each CQ's completion channel
//     are non-blocking and parked in the runtime's netpoller, one goroutine
//     per device for connection events and none for completions (CQ.Wait
//     parks the caller).
//   - Work request ids: the provider puts its own sequence numbers in
//     wr_id (per-QP rings of the caller's ids, indexed, no map) so it can
//     enforce MaxSendWR/MaxRecvWR itself, free send slots when a later
//     signalled WR completes, and tell sends from receives in error
//     completions, whose opcode the hardware leaves undefined.
//   - The provider owns its queue pairs (ibv_create_qp, then INIT/RTR/RTS
//     with the attributes rdma_init_qp_attr computes, and rdma_establish on
//     the dialing side) instead of letting rdma_cm drive them: with an
//     rdma_cm-managed QP the RNR retry count is the one the *peer* puts in
//     its CM message, so ConnOptions.RNRRetry could not mean "our sends".
//     Here it sets our QP's retry count and is also what we ask of the peer.
//     Receives of ConnOptions.InitialRecv are posted in INIT, before the
//     connect request or reply leaves. Disconnect and a peer's disconnect
//     move the QP to the error state themselves, which flushes every
//     outstanding work request.
//   - On soft-RoCE (rxe) a send chain that moves 4 KiB or more is posted
//     by the connection's poster goroutine and PostSend returns before
//     the device has it: a user QP's requester work (segmenting, copying,
//     ICRC) runs inside ibv_post_send, and so does a Read's whole transfer
//     when the peer is on the same rxe device; it would stall the caller's
//     next work. Later chains queue behind it (the device sees every chain
//     in PostSend order). If a queued post fails, the QP goes to the error
//     state, the chains not posted complete with StatusFlushed, and
//     PostSend fails from then on (post.go). Smaller chains, and every
//     chain on other devices, are posted by the caller (a doorbell).
//   - Local scatter/gather entries are checked against the PD's regions at
//     post time (ErrInvalidSGE) because devices disagree on how they report
//     a bad receive SGE (rxe says "local QP operation error").
//   - Registration with remote access is two ibv_reg_mr registrations of
//     the same memory: a local one whose lkey the caller uses, and a remote
//     one whose rkey peers use. Invalidate deregisters the remote one, so
//     the rkey dies at once and local use goes on. A peer's Send with
//     Invalidate of such an rkey only works on devices that let a peer
//     invalidate ibv_reg_mr registrations: rxe does not (it only invalidates
//     fast-registration MRs and type-2 memory windows, which user space can
//     only bind on one QP), and it completes the receive with "remote invalid
//     request". Send with Invalidate is sent as IBV_WR_SEND_WITH_INV, and a
//     received IBV_WC_WITH_INV marks the local MR invalid and retires its
//     remote registration.
//   - rxe completes a receive too small for its message with "local QP
//     operation error"; on rxe that status on a receive is reported as
//     StatusLocalLength (the SGEs were checked at post time, so the length
//     is what failed; InfiniBand HCAs say IBV_WC_LOC_LEN_ERR).
//   - Asynchronous device events (ibv_get_async_event) are not read: a
//     fatal QP error shows in the completions (the QP flushes), and the CM
//     reports the end of the connection.
//   - Private data arrives padded to the CM message size on InfiniBand and
//     RoCE (56 bytes in a request, 196 in a reply, 148 in a reject).
//   - InitiatorDepth/ResponderResources of 0 mean 16; both are capped at
//     what the device and (when accepting) the peer allow. The CM reports a
//     connect request from the listener's side (its initiator_depth is the
//     peer's responder resources), so an accept's initiator depth is
//     min(ours, the peer's responder resources) and its responder resources
//     min(ours, the peer's initiator depth); the QP gets the same values
//     (max_rd_atomic, max_dest_rd_atomic). The Linux NFS/RDMA client offers
//     initiator depth 0 and responder resources max_qp_rd_atom (128 on rxe),
//     so the gateway may have up to 16 Reads outstanding against it.
//   - The provider creates its QPs itself (ibv_create_qp) and moves them
//     through the states with rdma_init_qp_attr. A dialing QP goes to INIT
//     before the CM has a connection, with no remote access; it is moved to
//     INIT again when the reply arrives, which grants Remote Write (and
//     Remote Read when the peer takes Reads), as librdmacm does.
package ibverbs
