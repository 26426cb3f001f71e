#!/bin/bash
# verbs-conformance.sh - run the verbs conformance suite (and the provider's
# own tests: TestReadDepthsLinuxClient) on the ibverbs
# provider (libibverbs/librdmacm via cgo) against soft-RoCE in the QEMU lab.
#
#   e2e/lab/verbs-conformance.sh [go test flags...]
#       e.g. -test.run 'TestConformance/Send'  or  -test.count 2
#
# Builds the test binary on the host (CGO_ENABLED=1 -tags ibverbs, needs
# libibverbs-dev and librdmacm-dev: scripts/install-deps.sh --lab), boots the
# guest of e2e/vm (the guest sees the host's /, so it runs the binary as
# is), creates rxe0 on a dummy netdev and runs the suite with
# RDMAGW_VERBS_ADDR set to rxe0's IP. Prints one line per case and exits
# non-zero if any case failed or the lab did not come up.
#
# Environment: OUT (results directory, default /tmp/rdmagw-lab-verbs),
# RDMAGW_VERBS_CONNS (connections of the many-connections case; the suite's
# default is 64), RDMAGW_IBVERBS_DEBUG=1 (log device statuses that map to
# StatusGeneral), LAB_TIMEOUT (seconds for the whole guest run, default 1800),
# LAB_RACE=1 (build the test binary with the race detector),
# and what e2e/vm/run-guest.sh reads (E2E_CACHE, KVER, E2E_ACCEL).
set -uo pipefail
LAB=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$LAB/../.." && pwd)
OUT=${OUT:-/tmp/rdmagw-lab-verbs}
BIN=$OUT/ibverbs.test
mkdir -p "$OUT"

# The guest kernel and initramfs (idempotent: under a second once built;
# on a fresh machine it installs the lab packages and fetches the kernel).
"$REPO/e2e/vm/build-guest.sh" || { echo "verbs-conformance: LAB-FAIL: building the guest failed" >&2; exit 2; }

echo "== building the ibverbs conformance test binary"
race=()
[ "${LAB_RACE:-0}" = 1 ] && race=(-race)
(cd "$REPO" && CGO_ENABLED=1 go test -c "${race[@]}" -tags ibverbs -o "$BIN" ./verbs/ibverbs/) || exit 2

if [ ! -x "$REPO/e2e/vm/run-guest.sh" ]; then
    echo "verbs-conformance: e2e/vm/run-guest.sh is missing" >&2
    exit 2
fi
# A TCG guest takes all the CPU it gets; never run two at once.
while pgrep qemu-system-x86 > /dev/null; do
    echo "== waiting for another QEMU guest to finish"
    sleep 20
done

echo "== booting the lab guest"
"$REPO/e2e/vm/run-guest.sh" -q -m 2048 -c 2 -t "${LAB_TIMEOUT:-1800}" -o "$OUT/guest" \
    -e "RDMAGW_VERBS_CONNS=${RDMAGW_VERBS_CONNS:-}" -e "RDMAGW_IBVERBS_DEBUG=${RDMAGW_IBVERBS_DEBUG:-}" \
    -- "$LAB/verbs-conformance-guest.sh" "$BIN" "$@"
rc=$?

log=$OUT/guest/verbs.log
if [ -f "$log" ]; then
    echo "== per-case results ($log)"
    grep -E -- '^ *--- (PASS|FAIL|SKIP)' "$log" | sed 's/ (.*//'
    grep -E '^(PASS|FAIL|ok|FAIL)\b' "$log" | tail -2
else
    echo "== no test log; console: $OUT/guest/console.log"
    tail -30 "$OUT/guest/console.log" 2>/dev/null
fi
exit "$rc"
