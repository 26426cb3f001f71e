package verbstest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
)

// BenchTCP is the baseline the RDMA numbers are read against: size-byte
// messages streamed one way over a plain TCP connection between two
// sockets of this process, on the IP the provider listens on (loopback by
// default, the rxe interface in the lab). The writer writes b.N messages,
// the reader reads them into one buffer of size bytes, as a receiver
// copying out of the socket does; the last message is checked byte for
// byte.
func BenchTCP(b *testing.B, f Factory, size int) {
	c := resolve(f)
	ln, err := net.Listen("tcp", net.JoinHostPort(c.host, "0"))
	if err != nil {
		b.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	type result struct {
		last []byte
		err  error
	}
	n := b.N
	got := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer conn.Close()
		buf := make([]byte, size)
		for i := 0; i < n; i++ {
			if _, err := io.ReadFull(conn, buf); err != nil {
				got <- result{err: fmt.Errorf("reading message %d: %w", i, err)}
				return
			}
		}
		got <- result{last: buf}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	msg := pattern(size, 83)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < n; i++ {
		if _, err := conn.Write(msg); err != nil {
			_ = conn.Close() // unblocks the reader
			r := <-got
			b.Fatalf("writing message %d: %v", i, errors.Join(err, r.err))
		}
	}
	r := <-got
	b.StopTimer()
	if r.err != nil {
		b.Fatal(r.err)
	}
	same(b, "last TCP message", r.last, msg)
}
