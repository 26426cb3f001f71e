// Package nfsmem is an embedded, memory-backed NFSv3 and MOUNT v3 server
// over ONC RPC/TCP. It exists so that `rdmagw demo` (and tests) have a
// real NFS server to put behind the gateway on a machine with nothing but
// Go: one export "/", regular files, directories and symbolic links held
// in memory, MOUNT and NFS on one port.
//
// Files:
//
//	fs.go, fs_dir.go   the in-memory tree: nodes, attributes, directories
//	handle.go          file handles (instance + file id)
//	server.go          listener, connections, RPC dispatch and errors
//	mount.go           MOUNT v3
//	nfs3_*.go          the NFSv3 procedures, grouped by concern
//
// Undecodable arguments are answered with GARBAGE_ARGS, unknown
// procedures with PROC_UNAVAIL, other programs with PROG_UNAVAIL and
// other versions with PROG_MISMATCH; nothing a client sends panics the
// server. LINK and MKNOD return NFS3ERR_NOTSUPP.
package nfsmem
