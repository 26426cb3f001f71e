package gateway

import "github.com/rdmagw/rdmagw/rdmarpc"

// What the external tests (package gateway_test) may reach of the
// gateway's internals, and nothing else may.

// ReversePool is r's registered memory pool.
func ReversePool(r *Reverse) *rdmarpc.Pool { return r.Pool }
