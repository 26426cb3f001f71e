package main

import (
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/internal/nfsclient"
)

func page(eof bool, names ...string) nfsclient.DirPage {
	p := nfsclient.DirPage{EOF: eof, Size: 100 + 20*len(names)}
	for i, n := range names {
		p.Entries = append(p.Entries, nfsclient.DirEntry{Name: n, FileID: uint64(10 + i), Cookie: uint64(i + 1)})
	}
	return p
}

// TestSamePage: a page through the gateway must equal the direct one, and
// a direct page that does not fill the count proves nothing.
func TestSamePage(t *testing.T) {
	want := page(false, ".", "..", "a", "b")
	if err := samePage(page(false, ".", "..", "a", "b"), want); err != nil {
		t.Fatalf("same page: %v", err)
	}
	renamed := page(false, ".", "..", "a", "c")
	renamed.Size = want.Size
	cookie := page(false, ".", "..", "a", "b")
	cookie.Entries[3].Cookie = 99
	for name, tc := range map[string]struct {
		got, want nfsclient.DirPage
		msg       string
	}{
		"short":     {page(false, ".", "..", "a"), want, "reply"},
		"eof":       {page(true, ".", "..", "a", "b"), want, "eof"},
		"name":      {renamed, want, "entry 3"},
		"cookie":    {cookie, want, "entry 3"},
		"empty":     {nfsclient.DirPage{}, nfsclient.DirPage{}, "does not fill"},
		"directeof": {page(true, "."), page(true, "."), "does not fill"},
	} {
		err := samePage(tc.got, tc.want)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.msg)
		}
	}
	var s summary
	s.add(3940, 3900, nil)
	s.add(3944, 3910, samePage(page(true), want))
	if got := s.String(); !strings.HasPrefix(got, "readdirprobe: 2 counts, reply sizes 3900 bytes, 1 failed; count 3944:") {
		t.Fatalf("summary %q", got)
	}
}
