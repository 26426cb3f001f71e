#!/bin/bash
# 10-baseline-rdma.sh - proves the lab: the guest kernel's NFS client
# (xprtrdma) -> the guest's knfsd (svcrdma) over soft-RoCE (rxe0 on a dummy
# netdev), proto=rdma port=20049, no gateway. NFSv3 (nolock) and NFSv4.x
# ($E2E_BASELINE_VERSIONS, else $E2E_VERSIONS), each with the full data
# suite of lib.sh (nfs_suite).
# e2e-timeout: 600  (run.sh: limit for this case's guest)
. "$E2E_VM/lib.sh"
VERSIONS=${E2E_BASELINE_VERSIONS:-${E2E_VERSIONS:-3 4.0 4.1 4.2}}
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_knfsd setup_knfsd rdma || lab_fail "setup_knfsd"
for v in $VERSIONS; do
    opts="vers=$v,proto=rdma,port=20049"; path=/
    [ "$v" = 3 ] && { opts="$opts,nolock"; path=$NFS_EXPORT; }
    nfs_suite "rdma_v${v/./}" "$RXE_IP:$path" "$opts"
done
echo "--- rxe0: $(rdma statistic show link rxe0/1 2>/dev/null | tr ' ' '\n' | paste - - |
    grep -E 'sent_pkts|rcvd_pkts|retry|rnr|seq_err|dup_req' | tr '\n' ' ')"
[ "$FAILS" = 0 ] || { dmesg | tail -40; tail -n 5 "$OUT"/{mountd,nfsdcld}.log; }
stop_bg
exit $((FAILS > 0))
