package forward_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// rdma.srq_depth: every client connection takes its calls from one shared
// receive queue. Several clients write and read back files through
// nfs-ganesha at once, byte for byte; the receive pool holds srq_depth
// buffers however many clients connect, all posted again once the calls
// are answered, and without srq_depth it holds credits + 8 per client.
func TestForwardSharedReceiveQueue(t *testing.T) {
	const depth, clients = 64, 4
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, func(c *gateway.Config) { c.RDMA.SRQDepth = depth })
	root := mount3(t, g.MountAddr, g.Export)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := dialRDMA(t, gw.Addr().String())
		n := &nfs3{c: c, t: t}
		name := fmt.Sprintf("srq-%d", i)
		fh := n.create(root, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := pattern(300<<10+i, byte(i))
			n.writeFile(fh, data, 64<<10)
			if got := n.readFile(fh, 32<<10); !bytes.Equal(got, data) {
				errs <- fmt.Errorf("client %d: read back %d bytes differing from the %d written", i, len(got), len(data))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	m := gw.Metrics()
	if v := gwtest.Metric(t, m, "rdmagw_srq_depth"); v != depth {
		t.Errorf("rdmagw_srq_depth = %v, want %d", v, depth)
	}
	gwtest.WaitFor(t, 5*time.Second, "every shared receive posted again", func() bool {
		return gwtest.Metric(t, m, "rdmagw_srq_posted") == depth
	})
	if v := gwtest.Metric(t, m, "rdmagw_recv_pool_bytes_registered"); v != depth*4096 {
		t.Errorf("receive pool registered %v bytes with %d clients, want srq_depth x 4 KiB = %d", v, clients, depth*4096)
	}
	if v := gwtest.Metric(t, m, "rdmagw_srq_events_total", "event", "empty"); v != 0 {
		t.Errorf("the SRQ ran dry %v times", v)
	}

	// Without srq_depth each client holds credits + 8 receives.
	gw2 := startGateway(t, g.NFSAddr, nil)
	for range 2 {
		dialRDMA(t, gw2.Addr().String())
	}
	want := float64(2 * (gateway.DefaultConfig().RDMA.Credits + 8) * 4096)
	gwtest.WaitFor(t, 5*time.Second, "per-connection receives registered", func() bool {
		return gwtest.Metric(t, gw2.Metrics(), "rdmagw_recv_pool_bytes_registered") >= want
	})
	if v := gwtest.Metric(t, gw2.Metrics(), "rdmagw_srq_depth"); v != 0 {
		t.Errorf("rdmagw_srq_depth = %v without rdma.srq_depth", v)
	}
}
