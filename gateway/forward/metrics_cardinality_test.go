package forward_test

import (
	"context"
	"testing"

	"github.com/rdmagw/rdmagw/gateway/internal/gwtest"
	"github.com/rdmagw/rdmagw/internal/nfstest"
	"github.com/rdmagw/rdmagw/ulb"
)

// Calls with invented program, version and procedure numbers, sent
// through a gateway in front of nfs-ganesha (which answers PROG_UNAVAIL,
// PROG_MISMATCH or PROC_UNAVAIL), fold into the label value "other": the
// number of rdmagw_calls_total and rdmagw_replies_total series stays
// bounded however many different numbers a client invents.
func TestMetricsUnknownProceduresBounded(t *testing.T) {
	g := nfstest.StartGanesha(t)
	gw := startGateway(t, g.NFSAddr, nil)
	c := dialRDMA(t, gw.Addr().String())
	m := gw.Metrics()
	ctx := context.Background()

	const n = 200
	for i := uint32(0); i < n; i++ {
		for _, pvp := range [][3]uint32{
			{0x40000000 + i, 1, 0},     // unknown program
			{ulb.ProgNFS, 100 + i, 0},  // unknown version of NFS
			{ulb.ProgNFS, 3, 1000 + i}, // unknown procedure of NFSv3
		} {
			if _, err := c.call(ctx, pvp[0], pvp[1], pvp[2], nil, nil, nil); err != nil {
				t.Fatalf("call %v: %v", pvp, err)
			}
		}
	}
	if _, err := c.call(ctx, ulb.ProgNFS, 3, nfs3Null, nil, nil, nil); err != nil {
		t.Fatal(err)
	}

	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range fams {
		series[f.GetName()] = len(f.GetMetric())
	}
	// NFSv3 NULL, and the three "other" levels.
	if got := series["rdmagw_calls_total"]; got != 4 {
		t.Errorf("rdmagw_calls_total has %d series after %d invented calls, want 4", got, 3*n)
	}
	if got := series["rdmagw_replies_total"]; got > 4 {
		t.Errorf("rdmagw_replies_total has %d series, want at most 4", got)
	}
	for _, want := range []struct {
		labels []string
	}{
		{[]string{"program", "other", "version", "other", "procedure", "other"}},
		{[]string{"program", "nfs", "version", "other", "procedure", "other"}},
		{[]string{"program", "nfs", "version", "3", "procedure", "other"}},
	} {
		if v := gwtest.Metric(t, m, "rdmagw_calls_total", want.labels...); v != n {
			t.Errorf("calls_total%v = %v, want %d", want.labels, v, n)
		}
	}
	if v := gwtest.Metric(t, m, "rdmagw_calls_total", "program", "nfs", "version", "3", "procedure", "NULL"); v != 1 {
		t.Errorf("NFSv3 NULL calls = %v, want 1", v)
	}
}
