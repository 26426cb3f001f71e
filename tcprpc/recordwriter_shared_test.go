package tcprpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
)

// gateWriter holds its first Write until open closes, counting Writes.
type gateWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	first  chan struct{} // closed when the first Write has begun
	open   chan struct{}
	fail   error // returned by every Write after the first two (the first record's header and body)
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.writes++
	n := g.writes
	g.mu.Unlock()
	if n == 1 {
		close(g.first)
		<-g.open
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n > 2 && g.fail != nil {
		return 0, g.fail
	}
	return g.buf.Write(p)
}

// waitWaiting waits until n callers have records gathered for the next
// write (no time limit: it only waits for goroutines already started).
func waitWaiting(sw *SharedRecordWriter, n int) {
	for {
		sw.mu.Lock()
		k := len(sw.waiting)
		sw.mu.Unlock()
		if k == n {
			return
		}
		runtime.Gosched()
	}
}

// TestSharedRecordWriterGathers: while one caller's write is in progress,
// the records of seven others wait and then go out in one write, whole
// and in the order the callers arrived; eight records, two writes.
func TestSharedRecordWriterGathers(t *testing.T) {
	g := &gateWriter{first: make(chan struct{}), open: make(chan struct{})}
	sw := NewSharedRecordWriter(g, nil)
	var batches []int
	sw.hook = func(n int) { batches = append(batches, n) } // under sw.mu
	rec := func(i int) [][]byte {
		return [][]byte{{byte(i), 0xaa}, bytes.Repeat([]byte{byte(i)}, 10+i)}
	}
	errs := make(chan error, 8)
	go func() { errs <- sw.WriteRecordv(rec(0)) }()
	<-g.first
	for i := 1; i < 8; i++ {
		go func() { errs <- sw.WriteRecordv(rec(i)) }()
		waitWaiting(sw, i) // arrival order = i
	}
	close(g.open)
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(batches) != "[1 7]" {
		t.Fatalf("records per write %v, want [1 7] (the seven waiting ones together)", batches)
	}
	var want bytes.Buffer
	for i := range 8 {
		body := bytes.Join(rec(i), nil)
		want.Write(binary.BigEndian.AppendUint32(nil, uint32(len(body))|lastFragment))
		want.Write(body)
	}
	if !bytes.Equal(g.buf.Bytes(), want.Bytes()) {
		t.Fatalf("stream:\n%x\nwant:\n%x", g.buf.Bytes(), want.Bytes())
	}
}

// TestSharedRecordWriterError: a failed write fails every caller whose
// record it carried and every later caller; a caller whose record went
// out before it gets nil.
func TestSharedRecordWriterError(t *testing.T) {
	boom := errors.New("boom")
	g := &gateWriter{first: make(chan struct{}), open: make(chan struct{}), fail: boom}
	sw := NewSharedRecordWriter(g, nil)
	errs := make(chan error, 3)
	go func() { errs <- sw.WriteRecordv([][]byte{{1, 2, 3, 4}}) }()
	<-g.first
	for i := 1; i < 3; i++ {
		go func() { errs <- sw.WriteRecordv([][]byte{{5, 6, 7, 8}}) }()
		waitWaiting(sw, i)
	}
	close(g.open)
	got := []error{<-errs, <-errs, <-errs}
	var nils, booms int
	for _, err := range got {
		switch {
		case err == nil:
			nils++
		case errors.Is(err, boom):
			booms++
		}
	}
	if nils != 1 || booms != 2 {
		t.Fatalf("results %v: want one nil (the first record, written) and two %v", got, boom)
	}
	if err := sw.WriteRecordv([][]byte{{9}}); !errors.Is(err, boom) {
		t.Fatalf("after the failure: %v, want %v", err, boom)
	}
}

// TestSharedRecordWriterTCP: many goroutines writing records over TCP at
// once; the reader gets every record whole (none interleaved), byte for
// byte.
func TestSharedRecordWriterTCP(t *testing.T) {
	c1, c2 := tcpPairClosed(t)
	sw := NewSharedRecordWriter(c1, nil)
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				hdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(i))
				body := bytes.Repeat([]byte{byte(w*31 + i)}, 100+(i*37)%3000)
				if err := sw.WriteRecordv([][]byte{hdr, body}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	done := make(chan error, 1)
	go func() {
		rr := NewRecordReader(c2, nil)
		nextI := make([]uint32, writers)
		for range writers * each {
			if err := rr.Next(); err != nil {
				done <- err
				return
			}
			b, err := io.ReadAll(rr)
			if err != nil {
				done <- err
				return
			}
			w, i := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
			want := bytes.Repeat([]byte{byte(int(w)*31 + int(i))}, 100+(int(i)*37)%3000)
			if w >= writers || i != nextI[w] || !bytes.Equal(b[8:], want) {
				done <- fmt.Errorf("record from writer %d number %d (want number %d): %d bytes, not as written", w, i, nextI[w], len(b))
				return
			}
			nextI[w]++
		}
		done <- nil
	}()
	wg.Wait()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSharedRecordWriterNoAlloc: after warming up, a record costs no
// allocation.
func TestSharedRecordWriterNoAlloc(t *testing.T) {
	c1, c2 := tcpPairClosed(t)
	go io.Copy(io.Discard, c2)
	sw := NewSharedRecordWriter(c1, nil)
	vec := [][]byte{make([]byte, 40), make([]byte, 120)}
	sw.WriteRecordv(vec)
	if n := testing.AllocsPerRun(100, func() { sw.WriteRecordv(vec) }); n != 0 {
		t.Fatalf("%v allocations per record", n)
	}
}

// tcpPairClosed is tcpPair, closed at the test's end.
func tcpPairClosed(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	c1, c2 := tcpPair(t)
	t.Cleanup(func() { c1.Close(); c2.Close() })
	return c1, c2
}
