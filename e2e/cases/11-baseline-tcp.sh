#!/bin/bash
# 11-baseline-tcp.sh - the control: the same checks as 10-baseline-rdma, the
# guest's NFS client -> the guest's knfsd over TCP (port 2049), to the same
# address (rxe0's netdev, so the IP path is the same as for RDMA).
# e2e-timeout: 600  (run.sh: limit for this case's guest)
. "$E2E_VM/lib.sh"
VERSIONS=${E2E_BASELINE_VERSIONS:-${E2E_VERSIONS:-3 4.0 4.1 4.2}}
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_knfsd setup_knfsd || lab_fail "setup_knfsd"
for v in $VERSIONS; do
    opts="vers=$v,proto=tcp"; path=/
    [ "$v" = 3 ] && { opts="$opts,nolock"; path=$NFS_EXPORT; }
    nfs_suite "tcp_v${v/./}" "$RXE_IP:$path" "$opts"
done
[ "$FAILS" = 0 ] || { dmesg | tail -40; tail -n 5 "$OUT"/{mountd,nfsdcld}.log; }
stop_bg
exit $((FAILS > 0))
