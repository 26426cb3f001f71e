package verbstest

import (
	"context"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

const inflightSize = 8 << 20 // long enough on any transport to be mid-flight when deregistered

// testDeregisterInFlight deregisters a region while a large RDMA
// operation is placing data into it: once Deregister has returned, the
// memory must not change any more, whatever the operation's status. A
// real HCA guarantees it (deregistration invalidates the key and waits
// for in-flight DMA); a software provider must too, or a consumer that
// unmaps memory after Deregister (verbs.Memory.Free) crashes the process.
//
// Both places data can land are covered: the local sink of an RDMA Read
// and the remote target of an RDMA Write. The operation's completion may
// be a success (it finished before Deregister) or an error; either is
// logged. A transfer that happens to finish before Deregister makes the
// case pass trivially, never fail wrongly.
func testDeregisterInFlight(t *testing.T, c config) {
	all := verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite
	t.Run("ReadSink", func(t *testing.T) {
		e := newEnv(t, c)
		p := e.connect(t, nil, nil)
		src := e.srv.region(t, inflightSize, all)
		fill(src.Bytes(), 111)
		sink := e.cli.region(t, inflightSize, verbs.AccessLocalWrite)
		post(t, p.cli.conn, rdmaWR(1, verbs.OpRDMARead, src.at(0), sink.sge(0, inflightSize)))
		if err := sink.deregister(); err != nil {
			t.Fatalf("Deregister: %v", err)
		}
		mem := sink.raw()[:inflightSize]
		markers(mem)
		wc := e.waitOne(t, p.cli.scq)
		t.Logf("RDMA Read into a region deregistered under it completed %s", describe1(wc))
		if wc.ID != 1 {
			t.Fatalf("completion %s, want id 0x1", describe1(wc))
		}
		settle(p.cli.conn)
		checkMarkers(t, "RDMA Read sink after Deregister returned", mem)
	})
	t.Run("WriteTarget", func(t *testing.T) {
		e := newEnv(t, c)
		p := e.connect(t, nil, nil)
		target := e.srv.region(t, inflightSize, all)
		src := e.cli.region(t, inflightSize, 0)
		fill(src.Bytes(), 112)
		post(t, p.cli.conn, rdmaWR(1, verbs.OpRDMAWrite, target.at(0), src.sge(0, inflightSize)))
		if err := target.deregister(); err != nil {
			t.Fatalf("Deregister: %v", err)
		}
		mem := target.raw()[:inflightSize]
		markers(mem)
		wc := e.waitOne(t, p.cli.scq)
		t.Logf("RDMA Write into a region deregistered under it completed %s", describe1(wc))
		if wc.ID != 1 {
			t.Fatalf("completion %s, want id 0x1", describe1(wc))
		}
		// The writer's completion does not say the target is done
		// with the stream; give its receive side time to drain.
		settle(p.srv.conn)
		checkMarkers(t, "RDMA Write target after Deregister returned", mem)
	})
}

const marker = 0xee

func markers(b []byte) {
	for i := range b {
		b[i] = marker
	}
}

// settle waits until conn has ended or 200ms have passed: the time a
// provider's receive side needs to drain what was in flight.
func settle(conn verbs.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	select {
	case <-conn.Done():
		time.Sleep(20 * time.Millisecond)
	case <-ctx.Done():
	}
}

func checkMarkers(t *testing.T, what string, b []byte) {
	t.Helper()
	n, first := 0, -1
	for k, x := range b {
		if x != marker {
			if first < 0 {
				first = k
			}
			n++
		}
	}
	if n > 0 {
		t.Errorf("%s: %d bytes written after Deregister returned, the first at offset %d", what, n, first)
	}
}
