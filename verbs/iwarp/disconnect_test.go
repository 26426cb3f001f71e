package iwarp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

// freezeTx keeps c's tx goroutine parked until the connection ends: once
// it is idle, clearing txIdle makes kick (rx queueing a Read Request) not
// wake it; only dying does.
func freezeTx(t *testing.T, c *conn) {
	untilTx(t, func() bool { return c.txIdle.CompareAndSwap(true, false) })
}

// untilTx polls idle until it reports c's tx goroutine parked.
func untilTx(t *testing.T, idle func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !idle() {
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

// A Disconnect while a Read waits for its response flushes it and every
// entry after it, although Writes after the Read were handed to TCP in
// full: send completions are in order and, once one flushed, the rest
// flush too (RC semantics). The conformance suite's
// Lifecycle/DisconnectDuringTransfer saw "completion 2 succeeded after an
// earlier one was flushed" when, under load, the peer had not yet answered
// Read 1 by the time Write 2 was out. Here the peer's tx is frozen so it
// never answers (the Disconnect's FIN goes out only after the local flush,
// so the peer cannot answer in between).
func TestDisconnectFlushesAfterPendingRead(t *testing.T) {
	for _, cfg := range []Config{{}, {CompleteOnTransmit: true}} {
		t.Run(fmt.Sprintf("CompleteOnTransmit=%v", cfg.CompleteOnTransmit), func(t *testing.T) {
			cli, srv := pair(t, cfg, "")
			c := cli.conn.(*conn)
			local := cli.mem(t, 3*64, allAccess)
			remote := srv.mem(t, 3*64, allAccess)
			freezeTx(t, srv.conn.(*conn))
			var wrs []*verbs.SendWR
			for i, op := range []verbs.Opcode{verbs.OpRDMAWrite, verbs.OpRDMARead, verbs.OpRDMAWrite} {
				wrs = append(wrs, &verbs.SendWR{ID: uint64(i), Op: op, Signal: true,
					SGL:        []verbs.SGE{{Buf: local.Bytes()[i*64 : (i+1)*64], LKey: local.LKey()}},
					RemoteAddr: remote.Addr() + uint64(i*64), RKey: remote.RKey()})
			}
			wrs[0].Next, wrs[1].Next = wrs[1], wrs[2]
			if err := cli.conn.PostSend(wrs[0]); err != nil {
				t.Fatal(err)
			}
			// Wait until tx handed Write 2 to TCP.
			deadline := time.Now().Add(5 * time.Second)
			for {
				c.mu.Lock()
				wrote := c.sqTail == 3 && c.sqSent == 3 && (c.sqHead > 2 || c.sqAt(2).wrote)
				c.mu.Unlock()
				if wrote {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("Write 2 was never handed to TCP")
				}
				time.Sleep(time.Millisecond)
			}
			cli.conn.Disconnect()
			flushed := false
			for i := range 3 {
				wc := wait(t, cli.scq)
				if wc.ID != uint64(i) || (wc.Status != verbs.StatusSuccess && wc.Status != verbs.StatusFlushed) {
					t.Fatalf("completion %d: %+v, want id %d, success or flushed", i, wc, i)
				}
				if i == 1 && wc.Status != verbs.StatusFlushed {
					t.Fatalf("the Read the peer never answered completed %s, want flushed", wc.Status)
				}
				if flushed && wc.Status == verbs.StatusSuccess {
					t.Fatalf("completion %d succeeded after an earlier one was flushed", i)
				}
				flushed = flushed || wc.Status == verbs.StatusFlushed
			}
			waitDone(t, cli.conn)
			waitDone(t, srv.conn)
		})
	}
}

// A reset right behind the peer's last message, with nothing of ours to
// write after it, still ends the connection. The raw peer answers the MPA
// Request, sends one Send and resets (SO_LINGER 0) before the dialer has
// even read the Reply, so the receive run's first read takes the Send
// with the socket's queue then empty (TCP_INQ 0) and the reset already
// in: no edge will follow it, and only a later read can tell. The receive
// side looks with a read at least every rxResetCheck (shortened here),
// so the connection must end with the reset as its error, and the Send
// must have landed whole first.
func TestResetBehindLastMessageSeen(t *testing.T) {
	defer func(d time.Duration) { rxResetCheck = d }(rxResetCheck)
	rxResetCheck = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	msg := make([]byte, 77)
	fill(msg, 0x42)
	sent := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			sent <- err
			return
		}
		defer nc.Close()
		var req mpaFrame
		if err := readMPAFrame(nc, &req); err != nil {
			sent <- err
			return
		}
		rep := mpaFrame{Reply: true, CRC: req.CRC, Rev: 2, Enhanced: true, IRD: 16, ORD: 16}
		b, _ := appendMPAFrame(nil, &rep)
		h := untagged(opSend, qnSend, 1)
		h.Last = true
		b = appendFPDU(b, h, msg, req.CRC)
		if _, err := nc.Write(b); err != nil {
			sent <- err
			return
		}
		nc.(*net.TCPConn).SetLinger(0)
		sent <- nc.Close() // the reset
	}()
	cli := newSide(t, New(Config{}))
	in := cli.mem(t, 128, verbs.AccessLocalWrite)
	opts := cli.opts(nil)
	opts.InitialRecv = &verbs.RecvWR{ID: 9, SGL: []verbs.SGE{{Buf: in.Bytes(), LKey: in.LKey()}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := cli.dev.Dial(ctx, ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	cli.conn = c
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	wc := wait(t, cli.rcq)
	if wc.ID != 9 || wc.Status != verbs.StatusSuccess || wc.ByteLen != len(msg) {
		t.Fatalf("receive %+v (conn err %v), want ID 9 success with %d bytes", wc, c.Err(), len(msg))
	}
	sameBytes(t, in.Bytes()[:len(msg)], msg)
	select {
	case <-c.Done():
	case <-time.After(10 * rxResetCheck):
		t.Fatalf("connection still up %v after the peer's reset", 10*rxResetCheck)
	}
	if err := c.Err(); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection ended with %v, want the reset (ECONNRESET)", err)
	}
}
