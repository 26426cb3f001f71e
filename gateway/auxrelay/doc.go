// Package auxrelay lets NFSv3 clients that mount through rdmagw reach the
// filer's auxiliary services: an rpcbind responder on the gateway's
// address, and relays for MOUNT (100005 v1-3), NLM (100021 v1, v3, v4)
// and NSM (100024 v1) over TCP and UDP, including the filer's calls back
// to clients (NLM_GRANTED, the asynchronous *_RES, SM_NOTIFY).
//
// # What a Linux client does, and what answers it
//
// mount -o vers=3,proto=rdma gw:/export: mount.nfs knows the NFS port
// (port= or 20049 for rdma) and does not ask rpcbind for NFS; it asks
// gw:111 for MOUNT (PMAP v2 GETPORT over IPv4, RPCBIND v4/v3 GETADDR over
// IPv6), pings MOUNT NULL and sends MNT over TCP (rdma mounts use TCP for
// MOUNT). The responder answers with the relay's MOUNT port; MNT goes to
// the filer and its reply, file handle included, comes back unchanged:
// the handle is the filer's and NFS traffic through the gateway carries it
// verbatim. When the client first locks, the kernel's lockd asks gw:111
// for NLM (TCP for rdma mounts) and sends NLM calls to the relay.
//
// The responder also lists NFS (100003 v3/v4) on netids rdma/rdma6 at
// nfs_rdma_port (20049) and, if configured, on tcp; rpcbind itself (v2-4);
// SET/UNSET are refused (the table is the relay's own), CALLIT/INDIRECT/
// GETSTAT answer PROC_UNAVAIL.
//
// # Forwarding
//
// Calls are forwarded to the filer whole, with one change: the XID. Every
// forwarded call gets a fresh relay XID from one counter, and a table maps
// it back to (caller, original XID), so clients sharing the relay's one
// connection (or UDP socket) to the filer never collide, and a reply is
// matched wherever it arrives. A retransmission (same caller, same XID,
// still pending) reuses its relay XID so the filer's duplicate request
// cache sees a retransmission. Calls over UDP go over UDP to the filer
// (filer.udp) or over TCP. The filer's ports come from config or from its
// rpcbind (PMAP v2 GETPORT, cached for port_cache_ttl, forgotten when a
// send fails). Unanswered calls are forgotten after call_timeout (counted).
//
// # NLM callbacks
//
// An NLM server calls the client back: NLM_GRANTED / GRANTED_MSG when a
// blocked lock is granted, and TEST_RES..UNLOCK_RES answering the
// client's asynchronous *_MSG calls. Through the relay the filer sees the
// relay as the client. How each kind of filer finds the client:
//   - Linux lockd calls back the source address of the lock request, after
//     asking rpcbind on that address for NLM: the relay's own rpcbind
//     answers with the relay's NLM port, and the call arrives at the relay.
//   - nfs-ganesha calls back the host named by caller_name (it resolves the
//     name and asks rpcbind on port 111 there). Set nlm_caller_name to a
//     name or IP that resolves to the relay: the relay puts it in every
//     NLM call to the filer and puts the client's own caller_name back in
//     the callbacks.
//
// The relay tells the filer's calls apart by procedure (GRANTED, GRANTED_MSG,
// *_RES) and source address (one of the filer's), and routes them:
//   - GRANTED/GRANTED_MSG by the lock's owner: (fh, oh, svid) recorded from
//     the client's own lock calls (route_ttl), else by caller_name when it
//     is not rewritten. Linux clients put their hostname in oh, so owners
//     of different clients differ even with equal svids.
//   - *_RES by cookie: the relay replaces the cookie of each *_MSG call with
//     a relay-unique one (clients number their cookies alike) and restores
//     the client's cookie in the *_RES.
//
// The call goes to the client's NLM port, found by asking the client's
// rpcbind (client_rpcbind_port), over the transport the filer used, from
// the relay's listen address (the Linux client checks that a GRANTED comes
// from the server it locked with). The client's reply to a synchronous
// GRANTED goes back to the filer. A callback matching no client is logged
// and counted; a synchronous GRANTED is then answered NLM4_DENIED so the
// filer does not hold a lock for nobody.
//
// # NSM
//
// Client calls (SM_NOTIFY after a client reboot, and anything else) go to
// the filer's statd. An SM_NOTIFY from the filer (it rebooted) is answered
// at once and sent on to the statd of every client that used NLM or NSM
// through the relay within route_ttl, with mon_name set to notify_mon_name
// (the name the clients monitor the server by; Linux monitors the server's
// IP address by default), so the clients reclaim their locks.
//
// # What does not work, or only partly
//
//   - Identity at the filer: the filer sees every client at the relay's
//     address. A filer that keys NSM monitoring by address (Linux lockd's
//     default nsm_use_hostnames=0) treats all clients behind the relay as
//     one host: one client's SM_NOTIFY makes it drop every relayed client's
//     locks. With nlm_caller_name set the same holds for a filer keying by
//     caller_name, and a client's FREE_ALL (by name) frees nothing.
//     Exports restricted by client address must allow the relay.
//   - Filer reboot fan-out reaches only clients seen within route_ttl, and
//     only if the filer's statd notifies the relay's address (it does when
//     it monitors the address it saw).
//   - Callback routes live in memory: after a relay restart a pending
//     blocked lock's GRANTED is unroutable (DENIED); the client re-polls
//     (Linux retries blocked locks every 30 s).
//   - rpcbind answers with the advertise address, else the listen address,
//     else the address a TCP query arrived on; a UDP query to a wildcard
//     listener gets 0.0.0.0 in RPCBIND v3/v4 universal addresses (PMAP v2
//     and Linux, which use only the port, are unaffected): set
//     advertise_address when listening on a wildcard.
//   - Client port lookups use PMAP v2 GETPORT only (enough for Linux
//     clients, whose rpcbind answers it for IPv4 and IPv6 registrations of
//     lockd/statd).
//   - RPCSEC_GSS on MOUNT/NLM/NSM does not survive the relay: a GSS
//     call's verifier signs the header including the XID, which the relay
//     rewrites. AUTH_SYS, which Linux uses for all three, is unaffected.
//   - NFSACL (100227) is not relayed here: it travels on the NFS connection.
//
// # Testing
//
// The tests start a private nfs-ganesha (internal/nfstest/ganesha: free
// loopback ports, NLM and UDP on) and skip only without ganesha or root;
// rpcinfo and nfs-ls are the independent clients. ganesha in that setup
// cannot reach a statd, so it
// refuses every LOCK with DENIED_NOLOCKS; blocking locks and the callbacks
// are tested against a fake filer speaking the real protocol, with two
// clients on 127.0.0.2 and 127.0.0.3.
package auxrelay
