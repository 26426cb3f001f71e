package iwarp

import (
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// freezeTx keeps c's tx goroutine parked until the connection ends: once
// it is idle, clearing txIdle makes kick (rx queueing a Read Request) not
// wake it; only dying does.
func freezeTx(t *testing.T, c *conn) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !c.txIdle.CompareAndSwap(true, false) {
		if time.Now().After(deadline) {
			t.Fatal("tx never went idle")
		}
		time.Sleep(time.Millisecond)
	}
}

func waitIRQ(t *testing.T, c *conn, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		got := c.irqTail - c.irqHead
		c.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Read Requests queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// An orderly Disconnect answers the Read Requests the peer already sent
// (finding [A]): the zero-length fence Read behind a Send the local side
// received, so the peer's Send completes with success, not flushed; and a
// user RDMA Read larger than one transmit batch, whose data arrives whole.
// (The Send's success alone is not proof: on the FIN the peer counts a Send
// its tx already marked written as done; the finding saw the race where it
// had not.)
func TestDisconnectAnswersReceivedReads(t *testing.T) {
	t.Run("Fence", func(t *testing.T) {
		cli, srv := pair(t, Config{}, "")
		c := cli.conn.(*conn)
		rbuf := cli.mem(t, 64, allAccess)
		sbuf := srv.mem(t, 64, allAccess)
		fill(sbuf.Bytes(), 7)
		if err := cli.conn.PostRecv(&verbs.RecvWR{ID: 1, SGL: []verbs.SGE{{Buf: rbuf.Bytes(), LKey: rbuf.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		freezeTx(t, c)
		if err := srv.conn.PostSend(&verbs.SendWR{ID: 2, Op: verbs.OpSend, Signal: true,
			SGL: []verbs.SGE{{Buf: sbuf.Bytes(), LKey: sbuf.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		expectStatus(t, wait(t, cli.rcq), verbs.OpRecv, verbs.StatusSuccess)
		sameBytes(t, rbuf.Bytes(), sbuf.Bytes())
		waitIRQ(t, c, 1) // the fence Read
		cli.conn.Disconnect()
		wc := wait(t, srv.scq)
		if wc.ID != 2 || wc.Status != verbs.StatusSuccess {
			t.Fatalf("server Send completed %+v after the client received it and disconnected, want success", wc)
		}
		waitDone(t, cli.conn)
		waitDone(t, srv.conn)
		// Success above can also come from the FIN (flushSQ counts a
		// Send handed to TCP as done), but only if the server's tx had
		// marked it written by then: the fence answer must have come.
		sc := srv.conn.(*conn)
		sc.mu.Lock()
		pending := sc.orqTail - sc.orqHead
		sc.mu.Unlock()
		if pending != 0 {
			t.Fatalf("%d server Reads (the fence) unanswered after the client's orderly Disconnect", pending)
		}
		if err := cli.conn.Err(); err != nil {
			t.Fatalf("client Err %v after Disconnect", err)
		}
	})
	t.Run("LargeRead", func(t *testing.T) {
		const size = 3*batchBytes + 1234
		cli, srv := pair(t, Config{}, "")
		c := cli.conn.(*conn)
		src := cli.mem(t, size, allAccess)
		sink := srv.mem(t, size, allAccess)
		fill(src.Bytes(), 9)
		freezeTx(t, c)
		if err := srv.conn.PostSend(&verbs.SendWR{ID: 3, Op: verbs.OpRDMARead, Signal: true,
			SGL:        []verbs.SGE{{Buf: sink.Bytes(), LKey: sink.LKey()}},
			RemoteAddr: src.Addr(), RKey: src.RKey()}); err != nil {
			t.Fatal(err)
		}
		waitIRQ(t, c, 1)
		cli.conn.Disconnect()
		wc := wait(t, srv.scq)
		if wc.ID != 3 || wc.Status != verbs.StatusSuccess || wc.ByteLen != size {
			t.Fatalf("server Read completed %+v, want success with %d bytes", wc, size)
		}
		sameBytes(t, sink.Bytes(), src.Bytes())
		waitDone(t, srv.conn)
	})
}
