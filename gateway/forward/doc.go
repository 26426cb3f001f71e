// Package forward is the forward gateway: NFS clients speak
// RPC-over-RDMA (RFC 8166, RFC 8267) to it, and it speaks ONC RPC over
// TCP (RFC 5531 record marking) to the NFS server, one TCP connection
// per RDMA client (connection_policy per_client: XIDs pass through).
//
// One call and its reply (forward = RDMA side in front, TCP side behind):
//
//	RDMA client             gateway/forward                                   NFS server (TCP)
//	-----------             ---------------                                   ----------------
//	Send: RPC-over-RDMA --> rdmarpc.ResponderConn (the engine: parses the
//	  call, Read chunks     transport header, RDMA-Reads the Read chunks)
//	                          |
//	                          v session.ServeCall (session.go): pendingCall
//	                          |   by XID (pending.go), queued for the writer
//	                          v
//	                        writeCalls (backend.go): the call as one TCP  ----> record
//	                          record, header and chunk data vectored; onto
//	                          an idle connection ServeBatchDone writes it
//	                          on the engine's goroutine (backend_inline.go)
//	                                                                            |
//	                        readReplies (backend.go): matches the XID   <---- record
//	                          |
//	                          v replyBuilder (replybuilder.go): a
//	                          |   splitter.Splitter streams the record into
//	                          |   registered buffers, READ/READLINK results
//	                          |   as Write-chunk items
//	                          v
//	RDMA Write + Send   <-- call.Reply: the engine RDMA-Writes the items
//	  (reply)                 and the Reply chunk, then Sends the header
//
// NFSv4.1 callbacks go the other way on the same pair of connections:
// the server's CALL record on the backend connection -> readReplies ->
// backchannel.go -> a backward-direction RDMA Send to the client; the
// client's reply -> the backend writer -> the server.
//
// The backend connection survives: on a failure it is redialed with
// backoff from the same local port (dialer.go, gateway/internal/redial)
// and the calls without a reply are sent again; when the RDMA client
// goes, the connection is kept for backend.reconnect_grace for the
// client's return (park.go). auxrelay (gateway/auxrelay) relays the
// auxiliary programs (rpcbind, MOUNT, NLM, NSM) beside this data path.
//
// Words: "client" is always the RDMA client, "backend" always the TCP
// connection to the NFS server, "session" one client's state (the engine
// connection and its backend connection); "parked" a backend connection
// kept for a client that left.
//
// File map (where each byte is parsed or built):
//
//	forward.go       Gateway: New, Serve (accept loop, admission: allowed networks, connection limits), Close
//	responder.go     the engine's configuration per client connection; the shared receive pool and call-memory quota
//	session.go       session: ServeCall (the RPC call header read back from the engine's message), error replies made by the gateway, the reply handed to the engine
//	pending.go       pendingCall and the XID table of calls sent and unanswered
//	backend.go       the backend connection's writer, reader (reply record header, XID match) and NULL-ping watchdog; reconnect and re-send
//	backend_inline.go  the engine's own writes of calls onto an idle backend connection after its poll; what the socket did not take is the writer's
//	dialer.go        dialing the NFS server from the same local port (duplicate request cache)
//	replybuilder.go  a reply record streamed into registered memory, DDP items placed for the client's Write chunks
//	backchannel.go   NFSv4.1 callbacks from the server to the RDMA client, and their replies
//	park.go          backend connections kept across a client's reconnect
//	ops.go           a session in the live view, drain and liveness probe (gateway.ClientTable)
//	reload.go        which settings a reload applies to new connections (Reconfigure)
//	metrics.go       per-session byte counts for the live view; why a connection closed
//
// Errors: the package's sentinel errors start with "forward: "; the others
// say what failed where ("read reply xid 0x...: ...") around the cause;
// a bad configuration is a gateway.FieldError naming the field.
package forward
