// Package nfsclient is a small but real NFS client: MOUNT v3, NFSv3 and a
// minimal NFSv4.1 (sessions, OPEN/READ/WRITE/CLOSE, GETATTR) over either
// ONC RPC on TCP or RPC-over-RDMA through the rdmarpc requester. rdmagw's
// tests, `rdmagw demo` and `rdmagw bench` drive real servers and the
// gateway with it.
//
// Layers, bottom up:
//
//	Transport       one RPC call in, its results out (tcp.go, rdma.go)
//	Mount, V3, V4   procedures: encode arguments, decode results (mount.go, nfs3*.go, nfs4*.go)
//	files.go        whole-file helpers on top of V3 (chunked, concurrent)
//
// Every call carries an AUTH_SYS credential for uid 0 / gid 0, so the
// client sees what root sees on an export without root squashing.
package nfsclient
