package forward_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/rdmarpc"
	"github.com/rdmagw/rdmagw/ulb"
	"github.com/rdmagw/rdmagw/verbs"
)

// An ordinary client disconnect is no backend error.
func TestForwardClientDisconnectNoBackendError(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	m := gw.Metrics()
	for i := 0; i < 3; i++ {
		c := dialRDMA(t, gw.Addr().String())
		if _, err := c.call(context.Background(), ulb.ProgNFS, 3, nfs3Null, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		c.close()
		gwtest.WaitFor(t, 5*time.Second, "the disconnect to be counted", func() bool {
			return gwtest.Metric(t, m, "rdmagw_connections_closed_total", "reason", "client") == float64(i+1)
		})
	}
	time.Sleep(100 * time.Millisecond)
	if v := gwtest.Metric(t, m, "rdmagw_backend_errors_total"); v != 0 {
		t.Errorf("3 ordinary disconnects counted %v backend errors", v)
	}
}

// Bad input from a client is logged at INFO with the peer, rate-limited:
// 30 messages of transport version 3 (answered ERR_VERS by the engine)
// and 30 calls of RPC version 3 (answered RPC_MISMATCH by the session)
// give a burst of lines of each kind, the rest counted as suppressed.
func TestForwardBadInputLoggedRateLimited(t *testing.T) {
	g := nfstest.StartGanesha(t)
	var logs gwtest.SyncBuffer
	gw := startGatewayLog(t, g.NFSAddr, func(c *gateway.Config) { c.Log.Level = "info"; c.Log.Format = "json" }, &logs)
	m := gw.Metrics()
	const n = 30

	replies := rawExchange(t, gw.Addr().String(), n, func(i int) []byte {
		return gwtest.BE32(nil, uint32(0x1000+i), 3, 32, 0, 0, 0, 0) // rdma_vers 3 (2 is served: rdma.versions)
	})
	for i, r := range replies {
		if len(r) < 20 || binary.BigEndian.Uint32(r[12:]) != uint32(rdmarpc.ProcError) || binary.BigEndian.Uint32(r[16:]) != uint32(rdmarpc.ErrCodeVers) {
			t.Fatalf("answer %d to rdma_vers 3: % x, want RDMA_ERROR/ERR_VERS", i, r)
		}
	}
	c := dialRDMA(t, gw.Addr().String())
	for i := 0; i < n; i++ {
		xid := testXID.Add(1)
		call := gwtest.EncodeCall(xid, ulb.ProgNFS, 3, nfs3Null, nil)
		call[11] = 3 // rpcvers 3
		if _, err := c.callRaw(context.Background(), xid, call); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []string{"err_vers", "call_answered_rpc_mismatch"} {
		l := gwtest.Metric(t, m, "rdmagw_log_events_total", "event", kind, "outcome", "logged")
		s := gwtest.Metric(t, m, "rdmagw_log_events_total", "event", kind, "outcome", "suppressed")
		if l < 1 || l+s != n || s < 1 {
			t.Errorf("%s: %v lines logged, %v suppressed; want all %d events counted, some of them suppressed", kind, l, s, n)
		}
	}
	// The lines are at INFO, with the peer.
	seen := map[string]int{}
	for _, raw := range bytes.Split(bytes.TrimSpace([]byte(logs.String())), []byte("\n")) {
		var l struct {
			Level string `json:"@level"`
			Event string `json:"event"`
			Peer  string `json:"peer"`
		}
		if json.Unmarshal(raw, &l) != nil || l.Event == "" {
			continue
		}
		if l.Level != "info" || l.Peer == "" {
			t.Errorf("event line without INFO level or peer: %s", raw)
		}
		seen[l.Event]++
	}
	for _, kind := range []string{"err_vers", "call_answered_rpc_mismatch"} {
		if want := gwtest.Metric(t, m, "rdmagw_log_events_total", "event", kind, "outcome", "logged"); float64(seen[kind]) != want {
			t.Errorf("%d %s lines in the log, the metric says %v", seen[kind], kind, want)
		}
	}
}

// rawExchange connects to the gateway on raw verbs (RFC 8797 private
// data as Linux sends it), sends n messages made by msg one at a time and
// returns the answer to each.
func rawExchange(t *testing.T, addr string, n int, msg func(i int) []byte) [][]byte {
	t.Helper()
	dev := nfstest.OpenIWARP(t, "127.0.0.1")
	pd, _ := dev.AllocPD()
	defer pd.Close()
	cq, _ := dev.CreateCQ(64)
	defer cq.Close()
	mem := make([]byte, 2*4096)
	mr, err := pd.Register(mem, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	recv := verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: mem[:4096], LKey: mr.LKey()}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pdata := rdmarpc.PrivateData{MaxSendSize: 4096, MaxRecvSize: 4096}.Append(nil)
	conn, err := dev.Dial(ctx, addr, verbs.ConnOptions{PD: pd, SendCQ: cq, RecvCQ: cq, MaxSendWR: 4, MaxRecvWR: 4,
		MaxSGE: 1, PrivateData: pdata, InitialRecv: &recv})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out [][]byte
	wcs := make([]verbs.WC, 1)
	for i := 0; i < n; i++ {
		b := msg(i)
		copy(mem[4096:], b)
		if err := conn.PostSend(&verbs.SendWR{ID: 2, Op: verbs.OpSend, Signal: true,
			SGL: []verbs.SGE{{Buf: mem[4096 : 4096+len(b)], LKey: mr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		for got := false; !got; {
			if cq.Poll(wcs) == 0 {
				if err := cq.Wait(ctx); err != nil {
					t.Fatalf("message %d: no answer: %v", i, err)
				}
				continue
			}
			if wcs[0].Status != verbs.StatusSuccess {
				t.Fatalf("message %d: %v %v", i, wcs[0].Op, wcs[0].Status)
			}
			if wcs[0].Op == verbs.OpRecv {
				out = append(out, bytes.Clone(mem[:wcs[0].ByteLen]))
				recv.Next = nil
				if err := conn.PostRecv(&recv); err != nil {
					t.Fatal(err)
				}
				got = true
			}
		}
	}
	return out
}
