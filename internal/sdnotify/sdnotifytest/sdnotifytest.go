// Package sdnotifytest is a fake service manager for tests: a unixgram
// socket that collects the notifications sent to it.
package sdnotifytest

import (
	"net"
	"testing"
)

// Listen listens on name (a path, or '@' + an abstract name) until the
// test ends, and returns a channel of the notifications received.
func Listen(t testing.TB, name string) chan string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	got := make(chan string, 1000)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	return got
}
