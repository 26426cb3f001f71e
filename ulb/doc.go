// Package ulb is the NFS Upper-Layer Binding for RPC-over-RDMA (RFC 8267,
// and the version 2 binding draft where it differs) as code.
//
// It answers two questions about an ONC RPC message of an NFS-family
// program, without copying or allocating:
//
//   - Where are its DDP-eligible data items? A Walker steps through a call's
//     arguments or a reply's results, which may arrive in pieces, and
//     reports each eligible item (offset, length, padding) in message order,
//     so a gateway can land the item's body in registered memory straight
//     from the socket, and so Write chunk k pairs with the k-th READ-class
//     result of a COMPOUND.
//   - How big can the reply be? EstimateReply gives a requester the sizes of
//     the Write chunks and of the Reply chunk to offer for a call.
//
// On top of those, the requester policy every requester in the project
// uses (the reverse gateway, internal/nfsclient): requester.go turns an
// estimate into the chunks to offer (Requester.Plan, with the server
// quirks it works around) and decides short Reply chunk retries;
// splice.go puts a reply's Write-chunk payloads back into its XDR stream
// (SpliceReply).
//
// One binding a file: nfs2.go, nfs3.go, nfs4*.go, and aux.go for the
// programs that have no eligible items (MOUNT, NLM, NSM, NFSACL).
package ulb
