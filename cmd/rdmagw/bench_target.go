package main

import (
	"context"
	"fmt"
	"net"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

// benchTarget is one benchmarked file reached one way (through the
// gateway over RDMA, or directly over TCP) with one NFS version. Its
// methods are called from many workers at once.
type benchTarget interface {
	read(ctx context.Context, off uint64, n uint32) (int, error)
	write(ctx context.Context, off uint64, data []byte) error
	getattr(ctx context.Context) error
	close(ctx context.Context)
}

// v3Target is the file over NFSv3.
type v3Target struct {
	c  *nfsclient.V3
	fh []byte
}

func (t *v3Target) read(ctx context.Context, off uint64, n uint32) (int, error) {
	data, _, err := t.c.Read(ctx, t.fh, off, n)
	return len(data), err
}

func (t *v3Target) write(ctx context.Context, off uint64, data []byte) error {
	r, err := t.c.Write(ctx, t.fh, off, data, nfsproto.Unstable)
	if err == nil && int(r.Count) != len(data) {
		err = fmt.Errorf("short WRITE: %d of %d", r.Count, len(data))
	}
	return err
}

func (t *v3Target) getattr(ctx context.Context) error {
	_, err := t.c.Getattr(ctx, t.fh)
	return err
}

func (t *v3Target) close(context.Context) {}

// v4Target is the file opened over NFSv4.1, on its own session.
type v4Target struct {
	c *nfsclient.V4
	f *nfsclient.Open4
}

func (t *v4Target) read(ctx context.Context, off uint64, n uint32) (int, error) {
	data, _, err := t.c.Read(ctx, t.f, off, n)
	return len(data), err
}

func (t *v4Target) write(ctx context.Context, off uint64, data []byte) error {
	r, err := t.c.Write(ctx, t.f, off, data, nfsproto.Unstable)
	if err == nil && int(r.Count) != len(data) {
		err = fmt.Errorf("short WRITE: %d of %d", r.Count, len(data))
	}
	return err
}

func (t *v4Target) getattr(ctx context.Context) error {
	_, err := t.c.Getattr(ctx, t.f.FH)
	return err
}

func (t *v4Target) close(ctx context.Context) {
	_ = t.c.Close(ctx, t.f)
	_ = t.c.DestroySession(ctx)
}

// benchFile says where the benchmark file lives.
type benchFile struct {
	vers      string // "3" or "4.1"
	mountAddr string // MOUNT service (v3)
	export    string // v3 mount path, or the v4 path of the directory
	name      string
}

// openTarget opens the benchmark file over tr, creating it when create.
func openTarget(ctx context.Context, tr nfsclient.Transport, bf *benchFile, create bool) (benchTarget, error) {
	if bf.vers == "3" {
		root, err := nfsclient.MountRoot(ctx, bf.mountAddr, bf.export)
		if err != nil {
			return nil, err
		}
		c := &nfsclient.V3{T: tr}
		var fh []byte
		if create {
			fh, err = c.Create(ctx, root, bf.name, nfsproto.CreateUnchecked, nfsproto.Sattr3{SetMode: true, Mode: 0o644})
		} else {
			fh, _, err = c.Lookup(ctx, root, bf.name)
		}
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", bf.name, err)
		}
		return &v3Target{c: c, fh: fh}, nil
	}
	c := &nfsclient.V4{T: tr}
	if err := c.Setup(ctx); err != nil {
		return nil, err
	}
	dir, _, err := c.LookupPath(ctx, bf.export)
	if err != nil {
		_ = c.DestroySession(ctx)
		return nil, fmt.Errorf("lookup %s: %w", bf.export, err)
	}
	f, err := c.Open(ctx, dir, bf.name, create)
	if err != nil {
		_ = c.DestroySession(ctx)
		return nil, fmt.Errorf("open %s: %w", bf.name, err)
	}
	return &v4Target{c: c, f: f}, nil
}

// removeBenchFile removes the file at the end of the run.
func removeBenchFile(ctx context.Context, tr nfsclient.Transport, bf *benchFile) error {
	if bf.vers == "3" {
		root, err := nfsclient.MountRoot(ctx, bf.mountAddr, bf.export)
		if err != nil {
			return err
		}
		return (&nfsclient.V3{T: tr}).Remove(ctx, root, bf.name)
	}
	c := &nfsclient.V4{T: tr}
	if err := c.Setup(ctx); err != nil {
		return err
	}
	defer c.DestroySession(ctx)
	dir, _, err := c.LookupPath(ctx, bf.export)
	if err != nil {
		return err
	}
	return c.Remove(ctx, dir, bf.name)
}

// withPort returns host:port with addr's host and the given port.
func withPort(addr string, port int) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return net.JoinHostPort(host, fmt.Sprint(port))
}
