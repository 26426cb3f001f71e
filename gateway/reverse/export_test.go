package reverse

import (
	"time"

	"github.com/rdmagw/rdmagw/internal/sockread"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// What the external tests (package reverse_test) may reach of the
// gateway's internals, and nothing else may.

// PoolOf is r's registered memory pool.
func PoolOf(r *Gateway) *rdmarpc.Pool { return r.rdma.Pool }

// SetReaderHook sets testHookReader (client.go) for the test's
// duration; restore puts the previous one back.
func SetReaderHook(f func(*sockread.Reader)) (restore func()) {
	old := testHookReader
	testHookReader = f
	return func() { testHookReader = old }
}

// SetClientResetCheck sets clientResetCheck (client.go), like
// SetReaderHook.
func SetClientResetCheck(d time.Duration) (restore func()) {
	old := clientResetCheck
	clientResetCheck = d
	return func() { clientResetCheck = old }
}
