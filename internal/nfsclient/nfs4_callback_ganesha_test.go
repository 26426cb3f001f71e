package nfsclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway/forward/forwardtest"
	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/internal/nfstest/ganesha"
)

// startDelegGanesha starts a private ganesha with delegations enabled
// (ganesha.Options.Delegations); if the test fails or runs verbose, its
// log lines about delegations and callbacks are printed at the end.
func startDelegGanesha(t *testing.T) *ganesha.Server {
	t.Helper()
	g := ganesha.Start(t, ganesha.Options{Delegations: true})
	t.Cleanup(func() {
		if !t.Failed() && !testing.Verbose() {
			return
		}
		log, _ := os.ReadFile(g.Log)
		var keep []string
		for _, l := range strings.Split(string(log), "\n") {
			for _, w := range []string{"onfig", "eleg", "CB", "callback", "backchannel", "recall"} {
				if strings.Contains(l, w) {
					keep = append(keep, l)
					break
				}
			}
		}
		if len(keep) > 60 {
			keep = keep[len(keep)-60:]
		}
		t.Logf("ganesha log (callback lines):\n%s", strings.Join(keep, "\n"))
	})
	return g
}

// noDelegation is the skip message of a test whose OPEN got no
// delegation from ganesha.
func noDelegation(c *nfsclient.V4) string {
	all, nulls := c.CallbacksServed()
	return fmt.Sprintf("ganesha granted no read delegation although delegations are on "+
		"(ganesha 4.3: only FSAL GPFS and CEPH report delegation support, VFS logs "+
		"\"Delegation type not supported\"); callbacks served %d (CB_NULL %d), SEQUENCE status flags %#x",
		all, nulls, c.SeqStatusFlags())
}

// createFile creates name in dir with data and closes it.
func createFile(t *testing.T, ctx context.Context, c *nfsclient.V4, dir []byte, name string, data []byte) {
	t.Helper()
	f, err := c.Open(ctx, dir, name, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ctx, f, 0, data, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx, f); err != nil {
		t.Fatal(err)
	}
}

// openRetry opens name for read and write, waiting while the server says
// NFS4ERR_DELAY (a delegation recall in progress).
func openRetry(ctx context.Context, c *nfsclient.V4, dir []byte, name string) (*nfsclient.Open4, int, error) {
	for delays := 0; ; delays++ {
		f, err := c.Open(ctx, dir, name, false)
		if !errors.Is(err, nfsclient.NFS4ErrDelay) {
			return f, delays, err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, delays, ctx.Err()
		}
	}
}

func cbPathDown(flags uint32) bool {
	return flags&(nfsclient.Seq4StatusCBPathDown|nfsclient.Seq4StatusCBPathDownSession|nfsclient.Seq4StatusBackchannelFault) != 0
}

// Two NFSv4.1 clients through rdmagw over iWARP against ganesha with
// delegations: A opens a file for reading and gets a read delegation; B
// opens it for writing, so ganesha recalls A's delegation with CB_RECALL
// on A's backend TCP connection, which rdmagw forwards to A as a
// backward-direction RPC-over-RDMA call; A answers (the reply goes back
// the same way) and returns the delegation; B's OPEN completes, B writes,
// and A reads B's data byte for byte. The server never reports A's
// callback path down.
func TestV41DelegationRecallThroughGateway(t *testing.T) {
	g := startDelegGanesha(t)
	gw := forwardtest.Start(t, g.NFSAddr)
	ctx := nfstest.Ctx(t)
	old := bytes.Repeat([]byte("old data "), 1000)

	a := &nfsclient.V4{T: nfstest.DialRDMA(t, ctx, gw.Addr().String()), Callbacks: true}
	if err := a.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	dirA, _, err := a.LookupPath(ctx, g.Export)
	if err != nil {
		t.Fatal(err)
	}
	createFile(t, ctx, a, dirA, "deleg", old)
	if cbPathDown(a.SeqStatusFlags()) {
		t.Fatalf("A: SEQUENCE status flags %#x: callback path down", a.SeqStatusFlags())
	}
	fa, dg, err := a.OpenReadDeleg(ctx, dirA, "deleg")
	if err != nil {
		t.Fatal(err)
	}
	all, nulls := a.CallbacksServed()
	t.Logf("A: callbacks served before the recall: %d (CB_NULL %d); delegation %v; status flags %#x", all, nulls, dg != nil, a.SeqStatusFlags())
	if dg == nil {
		// ganesha 4.3: only FSAL GPFS and CEPH report delegation
		// support (fso_delegations_r). TestV41CallbacksThroughGateway
		// covers the callback path without a delegation.
		t.Skip(noDelegation(a))
	}
	got, _, err := a.Read(ctx, fa, 0, uint32(len(old)))
	if err != nil || !bytes.Equal(got, old) {
		t.Fatalf("A read before the recall: %d bytes, %v", len(got), err)
	}

	b := &nfsclient.V4{T: nfstest.DialRDMA(t, ctx, gw.Addr().String()), Callbacks: true}
	if err := b.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	dirB, _, err := b.LookupPath(ctx, g.Export)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fb, delays, err := openRetry(ctx, b, dirB, "deleg")
	if err != nil {
		t.Fatalf("B open for write: %v", err)
	}
	select {
	case r := <-a.Recalls():
		if r.Err != nil {
			t.Fatalf("A: DELEGRETURN after the recall: %v", r.Err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("A saw no CB_RECALL")
	}
	t.Logf("B's OPEN completed after %v and %d NFS4ERR_DELAY answers", time.Since(start).Round(time.Millisecond), delays)
	fresh := bytes.Repeat([]byte("NEW DATA from B! "), 700)
	if _, err := b.Write(ctx, fb, 0, fresh, 2); err != nil {
		t.Fatalf("B write: %v", err)
	}
	if err := b.Close(ctx, fb); err != nil {
		t.Fatal(err)
	}
	got, _, err = a.Read(ctx, fa, 0, uint32(len(fresh)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fresh) {
		t.Fatalf("A reads %d bytes that are not B's %d", len(got), len(fresh))
	}
	if cbPathDown(a.SeqStatusFlags()) || cbPathDown(b.SeqStatusFlags()) {
		t.Fatalf("SEQUENCE status flags A %#x B %#x: callback path down", a.SeqStatusFlags(), b.SeqStatusFlags())
	}
	if err := a.Close(ctx, fa); err != nil {
		t.Fatal(err)
	}
	all, nulls = a.CallbacksServed()
	t.Logf("A: callbacks served: %d (CB_NULL %d)", all, nulls)

	mfs, err := gw.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "rdmagw_backchannel_") {
			for _, m := range mf.GetMetric() {
				counts[mf.GetName()] += m.GetCounter().GetValue()
			}
		}
	}
	t.Logf("gateway backchannel metrics: %v", counts)
	if counts["rdmagw_backchannel_calls_total"] < 1 || counts["rdmagw_backchannel_replies_total"] < 1 ||
		counts["rdmagw_backchannel_errors_total"] != 0 {
		t.Fatalf("gateway backchannel metrics: %v", counts)
	}
	for _, c := range []*nfsclient.V4{a, b} {
		if err := c.DestroySession(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The same recall with client A directly on TCP: the client's callback
// service works on both transports.
func TestV41DelegationRecallTCP(t *testing.T) {
	g := startDelegGanesha(t)
	ctx := nfstest.Ctx(t)
	dial := func() nfsclient.Transport {
		tr, err := nfsclient.DialTCP(ctx, g.NFSAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	a := &nfsclient.V4{T: dial(), Callbacks: true}
	if err := a.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	dirA, _, err := a.LookupPath(ctx, g.Export)
	if err != nil {
		t.Fatal(err)
	}
	createFile(t, ctx, a, dirA, "deleg", []byte("old"))
	fa, dg, err := a.OpenReadDeleg(ctx, dirA, "deleg")
	if err != nil {
		t.Fatal(err)
	}
	if dg == nil {
		t.Skip(noDelegation(a))
	}
	b := &nfsclient.V4{T: dial()}
	if err := b.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	dirB, _, err := b.LookupPath(ctx, g.Export)
	if err != nil {
		t.Fatal(err)
	}
	fb, _, err := openRetry(ctx, b, dirB, "deleg")
	if err != nil {
		t.Fatal(err)
	}
	if r := <-a.Recalls(); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, err := b.Write(ctx, fb, 0, []byte("new"), 2); err != nil {
		t.Fatal(err)
	}
	got, _, err := a.Read(ctx, fa, 0, 3)
	if err != nil || string(got) != "new" {
		t.Fatalf("A reads %q, %v", got, err)
	}
	if cbPathDown(a.SeqStatusFlags()) {
		t.Fatalf("status flags %#x", a.SeqStatusFlags())
	}
}
