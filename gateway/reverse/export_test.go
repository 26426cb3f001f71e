package reverse

import "github.com/rdmagw/rdmagw/rdmarpc"

// What the external tests (package reverse_test) may reach of the
// gateway's internals, and nothing else may.

// PoolOf is r's registered memory pool.
func PoolOf(r *Gateway) *rdmarpc.Pool { return r.rdma.Pool }
