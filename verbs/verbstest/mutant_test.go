package verbstest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/iwarp"
	"github.com/rdmagw/rdmagw/verbs/verbstest"
)

// The suite is only worth something if it fails broken providers. Each
// mutant below wraps the iWARP provider and breaks one promise of the
// verbs contract; TestSuiteCatchesMutants runs the suite's matching cases
// against it in a child process and requires them to fail.

const envMutant = "VERBSTEST_MUTANT"

type mutant struct {
	name  string
	cases string // -test.run pattern below TestMutantChild
	want  string // a subtest that must be reported as failed
}

var mutants = []mutant{
	{"corrupt-send", "Send/Ordering", "Send/Ordering"},
	{"reverse-poll", "Send/Ordering", "Send/Ordering"},
	{"drop-wc-conn", "Send/Chain", "Send/Chain"},
	{"truncate-private-data", "Connect/PrivateData", "Connect/PrivateData/RFC8797"},
	{"drop-reject-data", "Connect/Reject", "Connect/Reject"},
	{"leak-goroutine", "Connect/Addresses", "Connect/Addresses"},
	{"no-invalidate", "Access/Remote/Invalidated", "Access/Remote/Invalidated/Write"},
	{"remote-access-as-general", "Access/Remote/BadRKey", "Access/Remote/BadRKey/Write"},
	{"flush-as-success", "Lifecycle/Disconnect", "Lifecycle/Disconnect/ClientFirst"},
	{"split-chain", "Lifecycle/QueueFull", "Lifecycle/QueueFull"},
	{"short-read", "RDMA/Sizes", "RDMA/Sizes/4097"},
	{"write-offset", "RDMA/Sizes", "RDMA/Sizes/1"},
	{"spin-wait", "CQ/Wait", "CQ/Wait/WakesOnCompletion"},
}

func TestSuiteCatchesMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	if os.Getenv(envMutant) != "" {
		t.Skip("in a mutant child")
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestMutantChild$/"+m.cases, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envMutant+"="+m.name, verbstest.EnvConns+"=4")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a provider with mutation %q:\n%s", m.name, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestMutantChild/"+m.want+" ") {
				t.Fatalf("mutation %q: want %s to fail; output:\n%s", m.name, m.want, out)
			}
		})
	}
}

// TestMutantChild runs the suite against the mutant named in the
// environment; it only runs as TestSuiteCatchesMutants' child.
func TestMutantChild(t *testing.T) {
	name := os.Getenv(envMutant)
	if name == "" {
		t.Skip("only runs as a child of TestSuiteCatchesMutants")
	}
	verbstest.Run(t, verbstest.Factory{
		Provider: &mProvider{Provider: iwarp.New(iwarp.Config{}), m: name},
		Quirks:   verbstest.Quirks{NoRNRRetry: true},
		Timeout:  5 * time.Second,
	})
}

// The wrappers pass everything through except what the mutation breaks.
// WC.Conn must come back as the wrapper the suite holds, so every
// wrapped Conn is remembered by its inner one.

var outer sync.Map // inner verbs.Conn -> *mConn

type mProvider struct {
	verbs.Provider
	m string
}

func (p *mProvider) Open(addr string) (verbs.Device, error) {
	d, err := p.Provider.Open(addr)
	if err != nil {
		return nil, err
	}
	return &mDevice{Device: d, m: p.m}, nil
}

type mDevice struct {
	verbs.Device
	m string
}

func (d *mDevice) AllocPD() (verbs.PD, error) {
	pd, err := d.Device.AllocPD()
	if err != nil {
		return nil, err
	}
	return &mPD{PD: pd, m: d.m}, nil
}

func (d *mDevice) CreateCQ(depth int) (verbs.CQ, error) {
	cq, err := d.Device.CreateCQ(depth)
	if err != nil {
		return nil, err
	}
	return &mCQ{CQ: cq, m: d.m}, nil
}

func (d *mDevice) Listen(addr string) (verbs.Listener, error) {
	ln, err := d.Device.Listen(addr)
	if err != nil {
		return nil, err
	}
	return &mListener{Listener: ln, m: d.m}, nil
}

func (d *mDevice) Dial(ctx context.Context, addr string, o verbs.ConnOptions) (verbs.Conn, error) {
	c, err := d.Device.Dial(ctx, addr, unwrap(o))
	var rej *verbs.RejectError
	if d.m == "drop-reject-data" && errors.As(err, &rej) {
		rej.PrivateData = nil
	}
	if err != nil {
		return nil, err
	}
	if d.m == "leak-goroutine" {
		go func() { <-make(chan struct{}) }()
	}
	return wrapConn(c, d.m), nil
}

func unwrap(o verbs.ConnOptions) verbs.ConnOptions {
	if pd, ok := o.PD.(*mPD); ok {
		o.PD = pd.PD
	}
	if cq, ok := o.SendCQ.(*mCQ); ok {
		o.SendCQ = cq.CQ
	}
	if cq, ok := o.RecvCQ.(*mCQ); ok {
		o.RecvCQ = cq.CQ
	}
	return o
}

type mPD struct {
	verbs.PD
	m string
}

func (pd *mPD) Register(buf []byte, a verbs.Access) (verbs.MR, error) {
	mr, err := pd.PD.Register(buf, a)
	if err != nil {
		return nil, err
	}
	return &mMR{MR: mr, m: pd.m}, nil
}

type mMR struct {
	verbs.MR
	m string
}

func (r *mMR) Invalidate() error {
	if r.m == "no-invalidate" {
		return nil
	}
	return r.MR.Invalidate()
}

func (r *mMR) Valid() bool { return r.m == "no-invalidate" || r.MR.Valid() }

type mCQ struct {
	verbs.CQ
	m string
}

func (cq *mCQ) Poll(wcs []verbs.WC) int {
	n := cq.CQ.Poll(wcs)
	for i := range wcs[:n] {
		wc := &wcs[i]
		if o, ok := outer.Load(wc.Conn); ok {
			wc.Conn = o.(*mConn)
		}
		switch {
		case cq.m == "drop-wc-conn":
			wc.Conn = nil
		case cq.m == "flush-as-success" && wc.Status == verbs.StatusFlushed:
			wc.Status = verbs.StatusSuccess
		case cq.m == "remote-access-as-general" && wc.Status == verbs.StatusRemoteAccess:
			wc.Status = verbs.StatusGeneral
		}
	}
	if cq.m == "reverse-poll" {
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			wcs[i], wcs[j] = wcs[j], wcs[i]
		}
	}
	return n
}

func (cq *mCQ) Wait(ctx context.Context) error {
	if cq.m != "spin-wait" {
		return cq.CQ.Wait(ctx)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// A Wait on a context that is already done returns at once:
		// this loop never parks.
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := cq.CQ.Wait(done); err == nil || !errors.Is(err, context.Canceled) {
			return err
		}
	}
}

type mListener struct {
	verbs.Listener
	m string
}

func (ln *mListener) Accept(ctx context.Context) (verbs.ConnRequest, error) {
	req, err := ln.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	return &mRequest{ConnRequest: req, m: ln.m}, nil
}

type mRequest struct {
	verbs.ConnRequest
	m string
}

func (r *mRequest) PrivateData() []byte {
	pd := r.ConnRequest.PrivateData()
	if r.m == "truncate-private-data" && len(pd) > 0 {
		return pd[:len(pd)-1]
	}
	return pd
}

func (r *mRequest) Accept(o verbs.ConnOptions) (verbs.Conn, error) {
	c, err := r.ConnRequest.Accept(unwrap(o))
	if err != nil {
		return nil, err
	}
	return wrapConn(c, r.m), nil
}

type mConn struct {
	verbs.Conn
	m string
}

func wrapConn(c verbs.Conn, m string) *mConn {
	w := &mConn{Conn: c, m: m}
	outer.Store(c, w)
	return w
}

func (c *mConn) PostSend(wr *verbs.SendWR) error {
	for w := wr; w != nil; w = w.Next {
		switch {
		case c.m == "corrupt-send" && w.Op == verbs.OpSend && len(w.SGL) > 0 && len(w.SGL[0].Buf) > 0:
			w.SGL[0].Buf[0] ^= 0x80
		case c.m == "short-read" && w.Op == verbs.OpRDMARead && len(w.SGL) > 0 && len(w.SGL[0].Buf) > 4096:
			w.SGL[0].Buf = w.SGL[0].Buf[:len(w.SGL[0].Buf)-1]
		case c.m == "write-offset" && w.Op == verbs.OpRDMAWrite:
			w.RemoteAddr++
		}
	}
	if c.m != "split-chain" {
		return c.Conn.PostSend(wr)
	}
	for w := wr; w != nil; w = w.Next {
		one := *w
		one.Next = nil
		if err := c.Conn.PostSend(&one); err != nil {
			return err
		}
	}
	return nil
}
