package nfsclient_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
)

// silentServer accepts connections and reads, but never answers.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// TestTCPTimeoutAndClose: a call without a reply ends with its context,
// and Close fails the calls still waiting.
func TestTCPTimeoutAndClose(t *testing.T) {
	addr := silentServer(t)
	tr, err := nfsclient.DialTCP(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := tr.Call(ctx, 100003, 3, 0, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call without reply: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tr.Call(context.Background(), 100003, 3, 0, nil)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	tr.Close()
	select {
	case err := <-done:
		if !errors.Is(err, nfsclient.ErrClosed) {
			t.Fatalf("pending call after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pending call not failed by Close")
	}
	if _, err := tr.Call(context.Background(), 100003, 3, 0, nil); !errors.Is(err, nfsclient.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}
