package nfstest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

// V4RoundTrip creates name in dir over NFSv4.1 (OPEN create), writes
// size bytes in 256 KiB WRITEs, checks GETATTR's size, reads the file
// back in READs and compares byte for byte (and against the server's
// disk when diskDir is known), then CLOSEs and REMOVEs it.
func V4RoundTrip(t *testing.T, ctx context.Context, c *nfsclient.V4, dir []byte, name string, size int, diskDir string) {
	t.Helper()
	f, err := c.Open(ctx, dir, name, true)
	if err != nil {
		t.Fatalf("OPEN: %v", err)
	}
	want := Pattern(size, 41)
	const chunk = 256 << 10
	for off := 0; off < size; off += chunk {
		end := min(off+chunk, size)
		r, err := c.Write(ctx, f, uint64(off), want[off:end], nfsproto.Unstable)
		if err != nil || int(r.Count) != end-off {
			t.Fatalf("WRITE at %d: %+v %v", off, r, err)
		}
	}
	if _, err := c.Commit(ctx, f); err != nil {
		t.Fatalf("COMMIT: %v", err)
	}
	a, err := c.Getattr(ctx, f.FH)
	if err != nil || a.Size != uint64(size) || a.Type != 1 {
		t.Fatalf("GETATTR: %+v %v", a, err)
	}
	got := make([]byte, 0, size)
	for off := 0; ; {
		data, eof, err := c.Read(ctx, f, uint64(off), chunk)
		if err != nil {
			t.Fatalf("READ at %d: %v", off, err)
		}
		got = append(got, data...)
		off += len(data)
		if eof || len(data) == 0 {
			break
		}
	}
	if i := FirstDiff(got, want); i >= 0 {
		t.Fatalf("read back differs at byte %d (%d bytes back)", i, len(got))
	}
	if diskDir != "" {
		disk, err := os.ReadFile(filepath.Join(diskDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if i := FirstDiff(disk, want); i >= 0 {
			t.Fatalf("file on the server's disk differs at byte %d", i)
		}
	}
	if err := c.Close(ctx, f); err != nil {
		t.Fatalf("CLOSE: %v", err)
	}
	if err := c.Remove(ctx, dir, name); err != nil {
		t.Fatalf("REMOVE: %v", err)
	}
	if _, err := c.Open(ctx, dir, name, false); !errors.Is(err, nfsclient.NFS4ErrNoEnt) {
		t.Fatalf("OPEN of the removed file: %v, want NFS4ERR_NOENT", err)
	}
}
