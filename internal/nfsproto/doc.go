// Package nfsproto holds the XDR types of NFSv3 (RFC 1813), MOUNT v3 and
// the AUTH_SYS credential that both rdmagw's NFS client (internal/nfsclient)
// and its embedded memory server (internal/nfsmem) encode and decode, so
// the two sides share one definition of every structure.
//
// Decoding goes through Dec, package xdr's sticky Reader over a whole message: a
// procedure's arguments or results decode field after field and the first
// failure is checked once at the end (that failure is what a server turns
// into GARBAGE_ARGS).
package nfsproto
