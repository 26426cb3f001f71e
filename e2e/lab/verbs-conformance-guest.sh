#!/bin/bash
# verbs-conformance-guest.sh BINARY [flags] - guest side of
# verbs-conformance.sh: rxe0 on a dummy netdev, then the conformance suite
# on it. Exit 100 when the lab itself did not come up.
. "$E2E_VM/lib.sh"
BIN=$1; shift
setup_rxe dummy || lab_fail "rxe did not come up"
ulimit -l unlimited
cd "$OUT" || exit 2
export RDMAGW_VERBS_ADDR=$RXE_IP
t0=$(now)
"$BIN" -test.v -test.run '^Test' -test.timeout 25m "$@" > "$OUT/verbs.log" 2>&1
rc=$?
result verbs-conformance "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(elapsed "$t0")"
[ $rc = 0 ] || dmesg | tail -30 > "$OUT/dmesg-tail.txt"
exit $rc
