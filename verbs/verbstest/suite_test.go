package verbstest

import (
	"strings"
	"testing"
	"time"

	"github.com/rdmagw/rdmagw/verbs"
)

func TestResolveDefaultsAndEnvironment(t *testing.T) {
	c := resolve(Factory{})
	if c.Addr != "127.0.0.1:0" || c.host != "127.0.0.1" || c.Conns != 64 || c.Timeout != 20*time.Second || c.RNRRetry != 1 {
		t.Fatalf("defaults: %+v", c)
	}
	t.Setenv(EnvAddr, "10.0.2.15")
	t.Setenv(EnvConns, "8")
	c = resolve(Factory{Addr: "127.0.0.1:0", Conns: 64})
	if c.Addr != "10.0.2.15:0" || c.host != "10.0.2.15" || c.Conns != 8 {
		t.Fatalf("environment: %+v", c)
	}
	t.Setenv(EnvAddr, "[fe80::1%eth0]:20049")
	if c = resolve(Factory{}); c.Addr != "[fe80::1%eth0]:20049" || c.host != "fe80::1%eth0" {
		t.Fatalf("IPv6 with port: %+v", c)
	}
}

func TestPaddedEqual(t *testing.T) {
	for _, tc := range []struct {
		got, sent []byte
		padded    bool
		want      bool
	}{
		{[]byte{1, 2}, []byte{1, 2}, false, true},
		{[]byte{1, 2, 0}, []byte{1, 2}, false, false},
		{[]byte{1, 2, 0, 0}, []byte{1, 2}, true, true},
		{[]byte{1, 2, 0, 3}, []byte{1, 2}, true, false},
		{[]byte{1}, []byte{1, 2}, true, false},
		{make([]byte, 56), nil, true, true},
		{nil, nil, false, true},
	} {
		if got := paddedEqual(tc.got, tc.sent, tc.padded); got != tc.want {
			t.Errorf("paddedEqual(% x, % x, %v) = %v", tc.got, tc.sent, tc.padded, got)
		}
	}
}

func TestDiffNamesFirstDifference(t *testing.T) {
	a := pattern(100, 1)
	b := append([]byte(nil), a...)
	if d := diff("x", a, b); d != "" {
		t.Fatal(d)
	}
	b[42] ^= 1
	b[50] ^= 1
	if d := diff("x", a, b); d == "" || !strings.Contains(d, "2 of 100 bytes differ, first at offset 42") {
		t.Fatalf("diff: %q", d)
	}
	if d := diff("x", a, b[:99]); !strings.Contains(d, "100 bytes, want 99") {
		t.Fatalf("diff: %q", d)
	}
	if c := pattern(100, 2); diff("x", a, c) == "" {
		t.Fatal("patterns of different seeds are equal")
	}
}

// TestOptionsTune: the Factory's Tune sees the suite's defaults and may
// change sizes, but not the PD and CQs the case owns.
func TestOptionsTune(t *testing.T) {
	var seen verbs.ConnOptions
	e := &env{c: resolve(Factory{Timeout: 3 * time.Second, Tune: func(o *verbs.ConnOptions) {
		seen = *o
		o.MaxSendWR, o.InitiatorDepth = 32, 4
		o.PD, o.SendCQ, o.RecvCQ = nil, nil, nil
	}})}
	var h host
	o := e.options(&h, nil, nil)
	if seen.MaxSendWR != defaultMaxWR || seen.Timeout != 3*time.Second || seen.RNRRetry != 7 {
		t.Fatalf("Tune saw %+v, want the suite defaults", seen)
	}
	if o.MaxSendWR != 32 || o.InitiatorDepth != 4 || o.MaxRecvWR != defaultMaxWR || o.PD != h.pd {
		t.Fatalf("options after Tune: %+v", o)
	}
}
