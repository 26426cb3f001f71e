// Package reverse is the reverse gateway: NFS clients speak ONC RPC over
// TCP to it, and it speaks RPC-over-RDMA to the NFS server as the
// requester, one RDMA connection per TCP client (connection_policy
// per_client: XIDs pass through).
//
// One call and its reply (reverse = TCP side in front, RDMA side behind):
//
//	TCP client              gateway/reverse                                   NFS server (RDMA)
//	----------              ---------------                                   -----------------
//	record: RPC call  ----> client.go readCalls: one call slot per call,
//	                          at most reverse.max_calls_per_client; calls
//	                          of up to 16 KiB taken in one sockread run
//	                          (callPump: no EAGAIN read before each wait)
//	                          |
//	                          v slot.read (call.go): a splitter.Splitter
//	                          |   streams the record: header and arguments
//	                          |   into scratch, WRITE/SYMLINK bodies into
//	                          |   registered buffers (Read-chunk items);
//	                          |   the reply planned (Write list, Reply chunk)
//	                          v
//	                        slot.serve (reply.go) -> rdmaLink.call
//	                          (link.go) -> rdmarpc.RequesterConn  --------> Send (+ Read chunks
//	                                                                          the server RDMA-Reads)
//	                                                                            |
//	                          rdmarpc.Result: inline reply, chunk data  <---- RDMA Write + Send
//	                          |
//	                          v replyVec (reply.go): the reply spliced
//	                          |   from the inline part and the chunk data,
//	                          |   no copy
//	record: RPC reply <---- writeReply (client.go): one vectored write,
//	                          shared with the other replies ready then
//
// NFSv4.1 callbacks go the other way on the same pair of connections:
// the server's backward-direction call on the RDMA connection ->
// backchannel.go -> a CALL record on the client's TCP connection; the
// client's REPLY record -> readCalls -> a backward-direction reply.
//
// The RDMA connection survives: on a failure, or a ping unanswered, it is
// redialed with backoff (gateway/internal/redial) and the calls waiting
// on it are sent again with their XIDs; after backend.give_up_after the
// client is disconnected.
//
// Words: "client" is always the TCP client, "link" (rdmaLink) the
// client's RDMA connection to the NFS server, "slot" (revSlot) one call
// on its way through.
//
// File map (where each byte is parsed or built):
//
//	reverse.go       Gateway: New, Serve (accept loop, admission), Close
//	client.go        revClient: one TCP client; the call reader (callPump over internal/sockread, record head, msg_type) and the reply writer
//	call.go          revSlot: a call record streamed into scratch and registered items, its RPC header checked, its reply planned
//	reply.go         the call over the link, retried on ERR_CHUNK with a larger Reply chunk; the reply spliced; the gateway's own error replies
//	link.go          rdmaLink: the RDMA connection to the server, redial, NULL pings on the reserve credit
//	backchannel.go   NFSv4.1 callbacks from the RDMA server to the TCP client, and their replies
//	ops.go           a client in the live view, drain and liveness probe (gateway.ClientTable)
//	reload.go        Reconfigure (only the live fields change)
//
// Errors: the package's sentinel errors start with "reverse: "; the others
// say what failed where ("read reply xid 0x...: ...") around the cause;
// a bad configuration is a gateway.FieldError naming the field.
package reverse
