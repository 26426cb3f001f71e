package reverse_test

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/gateway"
	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
)

// noLeaks runs f as a subtest (so that every cleanup of f has run when
// it returns) and then checks that the goroutines it started are gone.
func noLeaks(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Run("run", f)
	deadline := time.Now().Add(15 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const (
	progNFSACL = 100227
	progNFS    = 100003
)

// getaclArgs: NFSACL v3 GETACL { nfs_fh3 fh; unsigned mask }.
func getaclArgs() []byte { return gwtest.BE32(xdrOpaque(nil, []byte("acl file handle!")), 0xf) }

// getattr4ACL: COMPOUND { tag "", minorversion 0, PUTROOTFH, GETATTR
// {acl} }: the acl attribute has no size bound (RFC 8267 §6.2).
func getattr4ACL() []byte { return gwtest.BE32(nil, 0, 0, 2, 24, 9, 1, 1<<12) }

// systemErr is the SYSTEM_ERR reply the gateway makes for xid.
func systemErr(xid uint32) []byte { return gwtest.BE32(nil, xid, 1, 0, 0, 0, 5) }

// Short Reply chunk retry (RFC 8267 §3.1): the server answers ERR_CHUNK
// when the reply does not fit the room offered; for calls whose reply
// the binding cannot bound the gateway sends the call again under a new
// XID with a Reply chunk twice as large, up to reply_chunk_retries
// times, and the TCP client gets the reply under its own XID.
func TestReverseReplyChunkRetry(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		aclBody := nfstest.Pattern(40000, 3)   // fits after one retry (24.7 KB offered first)
		hugeBody := nfstest.Pattern(300000, 4) // fits no retry within the bound
		v4Body := nfstest.Pattern(12000, 5)    // 8 KiB offered first, 16 KiB on retry
		srv := startFakeServer(t, 32, func(c *fakeCall) (fakeAction, []byte) {
			switch {
			case c.prog == progNFSACL && c.proc == 1 && bytes.HasSuffix(c.rpc, gwtest.BE32(nil, 0xf)):
				return fakeAnswer, rpcAccepted(c.xid, aclBody)
			case c.prog == progNFSACL && c.proc == 1:
				return fakeAnswer, rpcAccepted(c.xid, hugeBody)
			case c.prog == progNFS && c.vers == 4 && c.proc == 1:
				return fakeAnswer, rpcAccepted(c.xid, v4Body)
			case c.prog == progNFS && c.vers == 3 && c.proc == 1:
				// A GETATTR whose reply the binding bounds: the server
				// refuses it (as if the estimate were short).
				return fakeErrChunk, nil
			}
			return defaultFakeHandler(c)
		})
		rev, logs := startReverseLogged(t, srv.addr(), func(c *gateway.Config) { c.Reverse.ReplyChunkRetries = 2 })
		cl := dialRaw(t, rev.Addr().String())
		retries := func() float64 { return gwtest.Metric(t, rev.Metrics(), "rdmagw_reply_chunk_retries_total") }
		roundTrip := func(call []byte) []byte {
			t.Helper()
			if err := cl.send(call); err != nil {
				t.Fatal(err)
			}
			r, err := cl.recv(20 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		// calls returns what the server received since n calls ago.
		mark := 0
		since := func() []fakeCall {
			all := srv.seen()
			var out []fakeCall
			for _, c := range all[mark:] {
				if c.proc != 0 { // not the pings
					out = append(out, c)
				}
			}
			mark = len(all)
			return out
		}
		since()

		// 1. NFSACL GETACL: one retry, right reply under the client's XID.
		call := rpcCall(0xac100001, progNFSACL, 3, 1, getaclArgs())
		if got, want := roundTrip(call), rpcAccepted(0xac100001, aclBody); !bytes.Equal(got, want) {
			t.Fatalf("GETACL reply: %d bytes, differs at %d (xid %#x)", len(got), nfstest.FirstDiff(got, want), binary.BigEndian.Uint32(got))
		}
		seen := since()
		if len(seen) != 2 {
			t.Fatalf("server saw %d GETACL calls, want 2 (the call and one retry)", len(seen))
		}
		if seen[0].xid != 0xac100001 || seen[1].xid == 0xac100001 {
			t.Errorf("XIDs at the server: %#x then %#x; the retry needs a new one", seen[0].xid, seen[1].xid)
		}
		if !bytes.Equal(seen[0].rpc, call) || !bytes.Equal(seen[1].rpc[4:], call[4:]) {
			t.Errorf("the retry is not the same call under a new XID")
		}
		if seen[0].replyRoom == 0 || seen[1].replyRoom != 2*seen[0].replyRoom || seen[1].replyRoom < uint64(len(aclBody)) {
			t.Errorf("Reply chunk rooms: %d then %d", seen[0].replyRoom, seen[1].replyRoom)
		}
		if n := retries(); n != 1 {
			t.Errorf("reply chunk retries = %v, want 1", n)
		}

		// 2. Beyond reply_chunk_retries: SYSTEM_ERR under the client's XID.
		call = rpcCall(0xac100002, progNFSACL, 3, 1, gwtest.BE32(xdrOpaque(nil, []byte("x")), 0x7))
		if got := roundTrip(call); !bytes.Equal(got, systemErr(0xac100002)) {
			t.Fatalf("GETACL with an unbounded reply answered %x..., want SYSTEM_ERR", got[:min(len(got), 32)])
		}
		seen = since()
		if len(seen) != 3 || seen[0].xid != 0xac100002 || seen[1].xid == seen[2].xid || seen[2].replyRoom != 4*seen[0].replyRoom {
			t.Errorf("server saw %d calls for a GETACL with 2 retries allowed, want 3, rooms doubling: %+v", len(seen), seen)
		}
		if n := retries(); n != 3 {
			t.Errorf("reply chunk retries = %v, want 3", n)
		}
		if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_gateway_error_replies_total", "reason", "err_chunk"); n != 1 {
			t.Errorf("err_chunk error replies = %v, want 1", n)
		}

		// 3. NFSv4 GETATTR of the acl attribute: one retry.
		call = rpcCall(0x40000001, progNFS, 4, 1, getattr4ACL())
		if got, want := roundTrip(call), rpcAccepted(0x40000001, v4Body); !bytes.Equal(got, want) {
			t.Fatalf("v4 GETATTR(acl) reply: %d bytes, differs at %d", len(got), nfstest.FirstDiff(got, want))
		}
		if seen = since(); len(seen) != 2 || seen[1].replyRoom < uint64(len(v4Body)) {
			t.Errorf("v4 GETATTR(acl): server saw %d calls, want 2", len(seen))
		}
		if n := retries(); n != 4 {
			t.Errorf("reply chunk retries = %v, want 4", n)
		}

		// 4. A call the binding bounds is not retried (it could run
		// twice): SYSTEM_ERR at once.
		call = rpcCall(0x30000001, progNFS, 3, 1, xdrOpaque(nil, []byte("fh")))
		if got := roundTrip(call); !bytes.Equal(got, systemErr(0x30000001)) {
			t.Fatalf("v3 GETATTR refused with ERR_CHUNK answered %x..., want SYSTEM_ERR", got[:min(len(got), 32)])
		}
		if seen = since(); len(seen) != 1 {
			t.Errorf("v3 GETATTR: server saw %d calls, want 1", len(seen))
		}
		if n := retries(); n != 4 {
			t.Errorf("reply chunk retries = %v after a non-retryable call, want still 4", n)
		}
		if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_gateway_error_replies_total", "reason", "err_chunk"); n != 2 {
			t.Errorf("err_chunk error replies = %v, want 2", n)
		}
		if n := gwtest.Metric(t, rev.Metrics(), "rdmagw_rdma_errors_received_total", "code", "ERR_CHUNK"); n != 6 {
			t.Errorf("ERR_CHUNK received = %v, want 6", n)
		}
		// Each retry is a DEBUG line with both XIDs; each refusal the
		// client gets SYSTEM_ERR for is a WARN with the client's XID.
		if n := gwtest.Logged(t, logs, "debug", "xid", nil, "retry_xid", nil); n != 4 {
			t.Errorf("%d retry lines, want 4", n)
		}
		for _, xid := range []uint32{0xac100002, 0x30000001} {
			if n := gwtest.Logged(t, logs, "warn", "xid", xid); n != 1 {
				t.Errorf("%d WARN lines for the refused call %#x, want 1", n, xid)
			}
		}
		// The connection still works.
		if got := roundTrip(rpcCall(0x5, progNFS, 3, 0, nil)); !bytes.Equal(got, rpcAccepted(5, nil)) {
			t.Fatalf("NULL after the retries answered %x...", got[:min(len(got), 32)])
		}
	})
}
