//go:build ibverbs

package main

// The libibverbs/librdmacm provider (cgo) for real RDMA NICs and
// soft-RoCE: `listen.provider: ibverbs` needs a binary built with
// `-tags ibverbs` (make build-ibverbs).
import _ "github.com/rdmagw/rdmagw/verbs/ibverbs"
