package nfsclient

import (
	"context"
	"fmt"
	"sync"

	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

// IOOptions tunes the whole-file helpers.
type IOOptions struct {
	Chunk       int    // bytes per READ/WRITE (default 1 MiB)
	Concurrency int    // calls in flight (default 4)
	Stable      uint32 // WRITE stable_how; Unstable (default) ends with a COMMIT
	// Progress, if set, is called (from any goroutine) with the bytes of
	// each completed READ or WRITE.
	Progress func(n int)
}

func (o *IOOptions) defaults() {
	if o.Chunk <= 0 {
		o.Chunk = 1 << 20
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
}

// forChunks runs do for every chunk of [0, size) with up to conc calls in
// flight and returns the first error.
func forChunks(ctx context.Context, size int64, chunk, conc int, do func(ctx context.Context, off int64, n int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	offs := make(chan int64)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := range offs {
				n := int(min(int64(chunk), size-off))
				if err := do(ctx, off, n); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for off := int64(0); off < size; off += int64(chunk) {
		select {
		case offs <- off:
		case <-ctx.Done():
			break feed
		}
	}
	close(offs)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
}

// WriteAll writes data to fh from offset 0 in chunks, several in flight,
// and commits at the end when the writes were UNSTABLE. A short write is
// an error (servers accept whole WRITEs up to their wtmax).
func (c *V3) WriteAll(ctx context.Context, fh []byte, data []byte, o IOOptions) error {
	o.defaults()
	var verfMu sync.Mutex
	var verf *[nfsproto.VerfSize]byte
	err := forChunks(ctx, int64(len(data)), o.Chunk, o.Concurrency, func(ctx context.Context, off int64, n int) error {
		r, err := c.Write(ctx, fh, uint64(off), data[off:off+int64(n)], o.Stable)
		if err != nil {
			return fmt.Errorf("WRITE at %d: %w", off, err)
		}
		if int(r.Count) != n {
			return fmt.Errorf("WRITE at %d: short write %d of %d", off, r.Count, n)
		}
		verfMu.Lock()
		if verf == nil {
			verf = &r.Verf
		}
		verfMu.Unlock()
		if o.Progress != nil {
			o.Progress(n)
		}
		return nil
	})
	if err != nil || o.Stable == nfsproto.FileSync {
		return err
	}
	v, err := c.Commit(ctx, fh, 0, 0)
	if err != nil {
		return fmt.Errorf("COMMIT: %w", err)
	}
	if verf != nil && v != *verf {
		return fmt.Errorf("COMMIT: write verifier changed (server restarted): rewrite needed")
	}
	return nil
}

// ReadAll reads size bytes of fh from offset 0, several READs in flight.
// A READ that returns less than asked is continued from where it stopped.
func (c *V3) ReadAll(ctx context.Context, fh []byte, size int64, o IOOptions) ([]byte, error) {
	o.defaults()
	out := make([]byte, size)
	err := forChunks(ctx, size, o.Chunk, o.Concurrency, func(ctx context.Context, off int64, n int) error {
		for n > 0 {
			data, eof, err := c.Read(ctx, fh, uint64(off), uint32(n))
			if err != nil {
				return fmt.Errorf("READ at %d: %w", off, err)
			}
			if len(data) > n {
				return fmt.Errorf("READ at %d: %d bytes returned for %d asked", off, len(data), n)
			}
			copy(out[off:], data)
			if o.Progress != nil {
				o.Progress(len(data))
			}
			off += int64(len(data))
			n -= len(data)
			if n > 0 && (eof || len(data) == 0) {
				return fmt.Errorf("READ at %d: file ends %d bytes early", off, n)
			}
		}
		return nil
	})
	return out, err
}
