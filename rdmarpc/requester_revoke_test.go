package rdmarpc

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// A device whose registrations can be made to fail their invalidation:
// the one fault of the per-RPC registration a real device will not
// produce on demand.
type revokeFailDev struct {
	verbs.Device
	fail *atomic.Bool
}

type revokeFailPD struct {
	verbs.PD
	fail *atomic.Bool
}

type revokeFailMR struct {
	verbs.MR
	fail *atomic.Bool
}

var errInjected = errors.New("injected invalidation failure")

func (d revokeFailDev) AllocPD() (verbs.PD, error) {
	pd, err := d.Device.AllocPD()
	if err != nil {
		return nil, err
	}
	return revokeFailPD{pd, d.fail}, nil
}

func (d revokeFailDev) Dial(ctx context.Context, addr string, o verbs.ConnOptions) (verbs.Conn, error) {
	o.PD = o.PD.(revokeFailPD).PD
	return d.Device.Dial(ctx, addr, o)
}

func (p revokeFailPD) Register(b []byte, a verbs.Access) (verbs.MR, error) {
	mr, err := p.PD.Register(b, a)
	if err != nil {
		return nil, err
	}
	return revokeFailMR{mr, p.fail}, nil
}

func (m revokeFailMR) Invalidate() error {
	if m.fail.Load() {
		return errInjected
	}
	return m.MR.Invalidate()
}

// When a call's registration cannot be revoked after its reply, the
// responder may still reach that memory: the requester fails the call,
// closes the connection (RFC 8166 §4.5.4) and counts a failed LOCAL_INV.
func TestRequesterRevokeFailureClosesConnection(t *testing.T) {
	p := newEnginePair(t, pairOpts{noRequester: true})
	var fail atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	p.req, err = DialRequester(ctx, revokeFailDev{p.cli.dev, &fail}, p.rawAddr,
		RequesterConfig{Pool: p.cli.pool, Metrics: p.qmet})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-p.accepted; err != nil {
		t.Fatal(err)
	}
	r, err := p.call(writeCallMsg(t, nil, 1, 8192), nil)
	if err != nil {
		t.Fatalf("WRITE before the fault: %v", err)
	}
	r.Release()

	fail.Store(true)
	_, err = p.call(writeCallMsg(t, nil, 2, 8192), nil)
	var re *RevokeError
	if !errors.As(err, &re) || !errors.Is(err, errInjected) {
		t.Fatalf("WRITE whose Read chunk cannot be revoked: %v, want a RevokeError", err)
	}
	select {
	case <-p.req.dead:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection stayed up")
	}
	if _, err := p.call(readCallMsg(3, 16), nil); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("call after the failure: %v, want ErrConnClosed", err)
	}
	if n := p.qmet.get("rdma_failed_" + verbs.OpLocalInv.String()); n != 1 {
		t.Errorf("failed LOCAL_INV counted %d times, want 1", n)
	}
	fail.Store(false)
}

// A call that reaches its registration after the connection was released
// (the reverse gateway's link cut under a READ, whose Write chunk was
// still to be registered) fails with ErrConnClosed, which the link
// answers by sending the call again on the next connection; and it
// neither registers on the closed PD nor closes it a second time. (It
// failed with a bare "verbs: closed" before, and the client got
// SYSTEM_ERR: modetest's TestReverseChainBackendHungAndCut, once in CI.)
func TestRequesterRegisterAfterReleaseIsConnClosed(t *testing.T) {
	p := newEnginePair(t, pairOpts{})
	c := p.req
	if c.dom == nil {
		t.Fatal("the requester shares the pool, so it should own its PD")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.pdRefs.Load(); n != 0 {
		t.Fatalf("PD references after Close: %d, want 0 (closed)", n)
	}
	x := &reqCtxt{conn: c}
	x.hdr.XID = 0x1234
	for _, acc := range []verbs.Access{verbs.AccessRemoteWrite, verbs.AccessRemoteRead} {
		_, err := x.expose(make([]byte, 4096), acc)
		if !errors.Is(err, ErrConnClosed) {
			t.Fatalf("registering after release: %v, want ErrConnClosed", err)
		}
	}
	if n := c.pdRefs.Load(); n != 0 {
		t.Fatalf("PD references after the failed registrations: %d, want 0", n)
	}
}
