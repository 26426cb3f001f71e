package forward_test

import (
	"bytes"
	"testing"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/rdmarpc"
)

// A client that advertises "Send With Invalidate OK" (RFC 8797) gets each
// reply to a call with chunks as Send With Invalidate of the call's rkey,
// as from Linux svcrdma: its registration is already revoked when the
// reply arrives (the pure-Go provider invalidates it on receipt), so it
// needs no local invalidation. A client that does not advertise it gets
// plain Sends.
func TestForwardSendWithInvalidate(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	m := gw.Metrics()
	root := mount3(t, g.MountAddr, g.Export)
	const size, chunk = 256 << 10, 64 << 10
	data := pattern(size, 7)

	run := func(name string, remoteInv bool) (local, remote uint64) {
		c := dialRDMAWith(t, gw.Addr().String(), func(cfg *rdmarpc.RequesterConfig) { cfg.RemoteInvalidate = remoteInv })
		n := &nfs3{c: c, t: t}
		fh := n.create(root, name)
		n.writeFile(fh, data, chunk) // 4 WRITEs, payload in a Read chunk
		got := n.readFile(fh, chunk) // 4 READs (and an EOF one), payload in a Write chunk
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: read back differs from what was written (first diff at %d)", name, firstDiff(got, data))
		}
		n.remove(root, name)
		local, remote = c.rq.InvalidateStats()
		c.close()
		return local, remote
	}

	local, remote := run("plain", false)
	if remote != 0 || local < 8 {
		t.Errorf("without the flag: %d registrations revoked locally, %d by the gateway; want >= 8 and 0", local, remote)
	}
	if v := gwtest.Metric(t, m, "rdmagw_replies_send_invalidate_total"); v != 0 {
		t.Errorf("send_invalidate replies to a client that did not offer it = %v", v)
	}

	local, remote = run("inv", true)
	t.Logf("with Send With Invalidate: %d registrations revoked by the gateway's replies, %d locally", remote, local)
	if remote < 8 {
		t.Errorf("with the flag: %d registrations revoked by the gateway, want >= 8 (every READ and WRITE)", remote)
	}
	if local != 0 {
		t.Errorf("with the flag: %d registrations still revoked locally, want 0", local)
	}
	if v := gwtest.Metric(t, m, "rdmagw_replies_send_invalidate_total"); v != float64(remote) {
		t.Errorf("rdmagw_replies_send_invalidate_total = %v, the client saw %d", v, remote)
	}
}
