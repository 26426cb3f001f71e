//go:build ibverbs && cgo

package ibverbs

import (
	"testing"

	"github.com/vishvananda/netlink/nl"
)

// A PORT_GET reply as the kernel builds it (nla_put: 4-byte padding):
// device index and name, port index, the netdev's index and name.
func TestNldevAttrs(t *testing.T) {
	var b []byte
	for _, a := range []*nl.RtAttr{
		nl.NewRtAttr(nldevDevIndex, nl.Uint32Attr(3)),
		nl.NewRtAttr(nldevDevName, nl.ZeroTerminated("siw0")),
		nl.NewRtAttr(nldevPortIndex, nl.Uint32Attr(1)),
		nl.NewRtAttr(50, nl.Uint32Attr(7)),
		nl.NewRtAttr(nldevNdevName, nl.ZeroTerminated("veth0")),
	} {
		b = append(b, a.Serialize()...)
	}
	a, err := nldevAttrs(b)
	if err != nil {
		t.Fatal(err)
	}
	if idx, ok := nlU32(a[nldevDevIndex]); !ok || idx != 3 {
		t.Errorf("device index %d %v, want 3", idx, ok)
	}
	if n := nlString(a[nldevDevName]); n != "siw0" {
		t.Errorf("device name %q", n)
	}
	if n := nlString(a[nldevNdevName]); n != "veth0" {
		t.Errorf("netdev name %q", n)
	}
	for _, bad := range [][]byte{b[:len(b)-3], {5, 0}, {2, 0, 1, 0}, {200, 0, 1, 0, 0, 0, 0, 0}} {
		if _, err := nldevAttrs(bad); err == nil {
			t.Errorf("nldevAttrs(%x) accepted a malformed list", bad)
		}
	}
}

func FuzzNldevAttrs(f *testing.F) {
	f.Add(nl.NewRtAttr(nldevNdevName, nl.ZeroTerminated("veth0")).Serialize())
	f.Add([]byte{4, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := nldevAttrs(b)
		if err == nil {
			_ = nlString(a[nldevNdevName])
			_, _ = nlU32(a[nldevDevIndex])
		}
	})
}
