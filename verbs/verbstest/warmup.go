package verbstest

import (
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
)

// warmUp makes one connection and sends one message before any leak
// baseline is taken, so goroutines a provider starts once per process are
// not counted as leaks. It is also a smoke test: if it fails nothing else
// can pass.
func warmUp(t *testing.T, c config) {
	t.Helper()
	t.Run("WarmUp", func(t *testing.T) {
		e := newEnvNoLeakCheck(t, c)
		p := e.connect(t, nil, nil)
		in := e.srv.region(t, 64, verbs.AccessLocalWrite)
		out := e.cli.region(t, 64, 0)
		fill(out.Bytes(), 1)
		postRecv(t, p.srv.conn, recvWR(1, in.sge(0, 64)))
		post(t, p.cli.conn, sendWR(2, out.sge(0, 64)))
		mustWC(t, e.waitOne(t, p.cli.scq), 2, verbs.OpSend, verbs.StatusSuccess, p.cli.conn)
		wc := e.waitOne(t, p.srv.rcq)
		mustWC(t, wc, 1, verbs.OpRecv, verbs.StatusSuccess, p.srv.conn)
		same(t, "received message", in.Bytes(), out.Bytes())
	})
	if t.Failed() {
		t.FailNow()
	}
}
