//go:build ibverbs && cgo

package iwarp

// Interop with another iWARP implementation: the Linux kernel's soft-iWARP
// device (siw), driven through the ibverbs provider (libibverbs + libsiw +
// librdmacm). The conformance suite runs with one end on each provider,
// both ways round (who listens, who dials), with and without MPA CRCs.
//
// It needs a siw device serving RDMAGW_VERBS_ADDR; in the lab e2e/cases/
// 70-siw-interop.sh builds this test binary (-tags ibverbs), creates
// siw0 and runs it. Elsewhere it skips.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmagw/rdmagw/verbs"
	"github.com/rdmagw/rdmagw/verbs/ibverbs"
	"github.com/rdmagw/rdmagw/verbs/verbstest"
)

// What siw does differently from the suite's defaults, by the role it
// plays. Both ends are iWARP (no RNR retry: a Send without a receive is a
// Terminate, RFC 5040 7.1). Where siw is the dialer (the requester of the
// RDMA cases): it completes Sends and Writes when they are sent and Reads
// when answered (so out of posting order), it scatters a Read into one SGE
// only (max_sge_rd 1), and an aborted Dial waits for iw_cm's MPA timeout.
// Where siw listens: libsiw never reports a remote invalidation in a
// receive completion (siw does invalidate), and siw serves RDMA Reads of
// regions registered without remote-read access.
var (
	siwDialerQuirks   = verbstest.Quirks{NoRNRRetry: true, CompleteOnTransmit: true, MaxReadSGE: 1, SlowDialAbort: true}
	siwListenerQuirks = verbstest.Quirks{NoRNRRetry: true, InvalidateUnreported: true, ReadPermissionUnchecked: true}
)

func needSiw(t *testing.T) {
	t.Helper()
	if os.Getenv(verbstest.EnvAddr) == "" {
		t.Skipf("%s not set (the lab's siw case sets it to siw0's address)", verbstest.EnvAddr)
	}
	if m, _ := filepath.Glob("/sys/class/infiniband/siw*"); len(m) == 0 {
		t.Skip("no siw device (rdma link add siw0 type siw netdev <dev>)")
	}
}

// TestSiwInterop runs the suite between the pure-Go provider and siw:
// GoListens has the pure-Go provider accept what siw dials (siw is the MPA
// initiator), SiwListens the other way round; each with MPA CRCs (the
// pure-Go provider asks for them, siw follows) and without (nobody asks:
// siw's mpa_crc_required is off).
func TestSiwInterop(t *testing.T) {
	needSiw(t)
	for _, crc := range []struct {
		name string
		cfg  Config
	}{{"CRC", Config{}}, {"NoCRC", Config{DisableCRC: true}}} {
		goProv := New(crc.cfg)
		t.Run("GoListens/"+crc.name, func(t *testing.T) {
			verbstest.Run(t, verbstest.Factory{Provider: goProv, Peer: ibverbs.New(), Quirks: siwDialerQuirks, Tune: siwTune})
		})
		t.Run("SiwListens/"+crc.name, func(t *testing.T) {
			verbstest.Run(t, verbstest.Factory{Provider: ibverbs.New(), Peer: goProv, Quirks: siwListenerQuirks, Tune: siwTune})
		})
	}
}

// TestSiwOpenByIP: the ibverbs provider finds siw0 from the address of
// its netdev. siw fills no RoCE GID table (rdmamap found nothing: "veth0
// (10.99.1.1) has no RDMA device"); the mapping comes from RDMA netlink.
func TestSiwOpenByIP(t *testing.T) {
	needSiw(t)
	addr := os.Getenv(verbstest.EnvAddr)
	d, err := ibverbs.New().Open(addr)
	if err != nil {
		t.Fatalf("ibverbs Open(%s): %v", addr, err)
	}
	defer d.Close()
	info := d.Info()
	t.Logf("Open(%s): %+v", addr, info)
	if !strings.HasPrefix(info.Name, "siw") || info.Transport != "iWARP" || len(info.Netdevs) == 0 {
		t.Errorf("Open(%s) = %+v, want the siw device, iWARP, with its netdev", addr, info)
	}
}

// siwTune keeps every connection within siw's limits.
func siwTune(o *verbs.ConnOptions) {}
