// Command readdirprobe proves reply-chunk sizing against a real NFSv3
// server for the kernel lab's reverse case (e2e/cases/40-reverse.sh, issue
// #14): it sends one READDIR per count in -from..-to (step -step) of the
// directory -dir under the export, once through the gateway (-gw, NFS over
// TCP) and once straight to the server (-direct), and requires every call
// through the gateway to answer NFS3_OK with the same page (entries,
// cookies, eof) the server gave directly. Counts just below the inline
// threshold make knfsd's reply fit inline only without the RPC-over-RDMA
// header; a gateway that offers no Reply chunk for them gets ERR_CHUNK and
// its TCP client SYSTEM_ERR.
//
//	readdirprobe -gw ADDR -direct ADDR -mountd ADDR -export PATH -dir NAME [-from N -to N -step N]
//
// It prints one summary line (counts tried, reply sizes seen, failures) and
// exits 0 when every count matched, 1 otherwise (2: setup failed).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
	"github.com/rdmagw/rdmagw/internal/nfsproto"
)

func main() {
	gw := flag.String("gw", "127.0.0.1:2050", "the gateway's NFS TCP address")
	direct := flag.String("direct", "", "the server's NFS TCP address")
	mountd := flag.String("mountd", "", "the server's mountd TCP address")
	export := flag.String("export", "/srv/nfs", "the exported path to MOUNT")
	dir := flag.String("dir", "", "the directory under the export to list")
	from := flag.Uint("from", 3940, "first READDIR count")
	to := flag.Uint("to", 3980, "last READDIR count")
	step := flag.Uint("step", 4, "count step")
	flag.Parse()
	if *direct == "" || *mountd == "" || *dir == "" || *step == 0 {
		fmt.Fprintln(os.Stderr, "usage: readdirprobe -gw ADDR -direct ADDR -mountd ADDR -export PATH -dir NAME")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gwc, dc, fh, err := setup(ctx, *gw, *direct, *mountd, *export, *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "readdirprobe:", err)
		os.Exit(2)
	}
	var s summary
	for c := *from; c <= *to; c += *step {
		want, err := dc.ReadDir(ctx, fh, 0, [nfsproto.VerfSize]byte{}, uint32(c))
		if err != nil {
			s.fail(fmt.Sprintf("count %d direct: %v", c, err))
			continue
		}
		got, err := gwc.ReadDir(ctx, fh, 0, [nfsproto.VerfSize]byte{}, uint32(c))
		if err == nil {
			err = samePage(got, want)
		}
		s.add(c, got.Size, err)
	}
	fmt.Println(s.String())
	if len(s.failures) > 0 || s.tried == 0 {
		os.Exit(1)
	}
}

// setup mounts export at mountd, looks dir up on the direct server and
// returns NFSv3 clients for the gateway and the server and dir's handle.
func setup(ctx context.Context, gw, direct, mountd, export, dir string) (gwc, dc *nfsclient.V3, fh []byte, err error) {
	mt, err := nfsclient.DialTCP(ctx, mountd)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("mountd %s: %w", mountd, err)
	}
	defer mt.Close()
	root, _, err := (&nfsclient.Mount{T: mt}).Mnt(ctx, export)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("MNT %s: %w", export, err)
	}
	dt, err := nfsclient.DialTCP(ctx, direct)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("direct %s: %w", direct, err)
	}
	gt, err := nfsclient.DialTCP(ctx, gw)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("gateway %s: %w", gw, err)
	}
	dc, gwc = &nfsclient.V3{T: dt}, &nfsclient.V3{T: gt}
	fh, _, err = dc.Lookup(ctx, root, dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("LOOKUP %s: %w", dir, err)
	}
	return gwc, dc, fh, nil
}

// samePage reports how the page through the gateway differs from the one
// the server sent directly (nil: same entries, cookies, eof and size).
func samePage(got, want nfsclient.DirPage) error {
	if got.Size != want.Size {
		return fmt.Errorf("reply %d bytes, direct %d", got.Size, want.Size)
	}
	if got.EOF != want.EOF {
		return fmt.Errorf("eof %v, direct %v", got.EOF, want.EOF)
	}
	if len(got.Entries) != len(want.Entries) {
		return fmt.Errorf("%d entries, direct %d", len(got.Entries), len(want.Entries))
	}
	for i, g := range got.Entries {
		w := want.Entries[i]
		if g.Name != w.Name || g.FileID != w.FileID || g.Cookie != w.Cookie {
			return fmt.Errorf("entry %d: %q/%d/%d, direct %q/%d/%d", i, g.Name, g.FileID, g.Cookie, w.Name, w.FileID, w.Cookie)
		}
	}
	if len(want.Entries) == 0 || want.EOF {
		return fmt.Errorf("direct page has %d entries, eof %v: the directory does not fill the count", len(want.Entries), want.EOF)
	}
	return nil
}

// summary collects the probe's outcome for its one line.
type summary struct {
	tried    int
	sizes    []int // distinct reply sizes of the calls that matched, in call order
	failures []string
}

func (s *summary) add(count uint, size int, err error) {
	s.tried++
	if err != nil {
		s.fail(fmt.Sprintf("count %d: %v", count, err))
		return
	}
	if !slices.Contains(s.sizes, size) {
		s.sizes = append(s.sizes, size)
	}
}

func (s *summary) fail(msg string) { s.failures = append(s.failures, msg) }

func (s *summary) String() string {
	sizes := make([]string, len(s.sizes))
	for i, n := range s.sizes {
		sizes[i] = strconv.Itoa(n)
	}
	line := fmt.Sprintf("readdirprobe: %d counts, reply sizes %s bytes, %d failed", s.tried, strings.Join(sizes, ","), len(s.failures))
	for _, f := range s.failures {
		line += "; " + f
	}
	return line
}
