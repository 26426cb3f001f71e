#!/bin/bash
# 22-inline.sh - larger inline thresholds with the Linux client: 4 KiB
# READ and WRITE without chunks. At the defaults (4 KiB both ways on
# both sides) a 4 KiB WRITE's data comes by Read chunk (the gateway pulls
# it with an RDMA Read, a round trip to the client more) and a 4 KiB
# READ's goes back by Write chunk. The gateway announces its receive size
# (rdma.inline_recv) in the RFC 8797 private data and xprtrdma sends
# inline up to the smaller of that and its sunrpc.rdma_max_inline_write
# (rpcrdma_update_cm_private); it announces its own receive size from
# rdma_max_inline_read, which caps the gateway's inline replies. The
# gateway runs with inline_recv and inline_send 8KiB; the client mounts
# NFSv3 twice: with its thresholds at 8192, where 1 MiB of 4 KiB O_DIRECT
# writes and reads must move no chunk bytes at all, and at the default
# 4096 (the control: the same I/O moves at least 1 MiB each way by chunk).
# The data read back is the data written, checked on knfsd's export too.
# e2e-timeout: 300  (run.sh: limit for this case's guest)
. "$E2E_VM/lib.sh"
need_gateway inline
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_knfsd setup_knfsd || lab_fail "setup_knfsd"
modprobe rpcrdma || lab_fail "rpcrdma module"
[ -w /proc/sys/sunrpc/rdma_max_inline_write ] || lab_fail "no /proc/sys/sunrpc/rdma_max_inline_write"
GW_FW_RDMA_CONF='  inline_recv: 8KiB
  inline_send: 8KiB'
if ! check gw_start start_gateway; then stop_bg; exit 1; fi

MNT=/mnt/inline
mkdir -p "$MNT"
head -c $((1 << 20)) /dev/urandom > /tmp/inline.src
opts="vers=3,proto=rdma,port=20049,nolock,mountport=$MOUNTD_PORT,mountproto=tcp,soft,timeo=150,retrans=2"

# run_io THRESHOLD TAG: mount with the client's inline thresholds at
# THRESHOLD, write /tmp/inline.src 4 KiB at a time with O_DIRECT (one
# 4 KiB WRITE each), read it back the same way, check the bytes, and set
# CHUNK_IN/CHUNK_OUT/INLINE_IN to what the gateway moved meanwhile.
run_io() {
    local thr=$1 tag=$2 f
    echo "$thr" > /proc/sys/sunrpc/rdma_max_inline_write || return 1
    echo "$thr" > /proc/sys/sunrpc/rdma_max_inline_read || return 1
    mount -t nfs -o "$opts" "$RXE_IP:$NFS_EXPORT" "$MNT" || return 1
    f=$MNT/inline-$tag
    gw_scrape ".$tag.0" || { umount "$MNT"; return 1; }
    dd if=/tmp/inline.src of="$f" bs=4k oflag=direct conv=fsync status=none &&
        dd if="$f" of="/tmp/inline.$tag" bs=4k iflag=direct status=none
    local rc=$?
    gw_scrape ".$tag.1"
    umount "$MNT"
    [ $rc = 0 ] || return 1
    cmp /tmp/inline.src "/tmp/inline.$tag" && cmp /tmp/inline.src "$NFS_EXPORT/inline-$tag" || return 1
    CHUNK_IN=$(( $(gw_metric read_chunk in "$OUT/metrics.$tag.1.txt") - $(gw_metric read_chunk in "$OUT/metrics.$tag.0.txt") ))
    CHUNK_OUT=$(( $(gw_metric write_chunk out "$OUT/metrics.$tag.1.txt") - $(gw_metric write_chunk out "$OUT/metrics.$tag.0.txt") ))
    INLINE_IN=$(( $(gw_metric inline in "$OUT/metrics.$tag.1.txt") - $(gw_metric inline in "$OUT/metrics.$tag.0.txt") ))
    echo "  client thresholds $thr: read_chunk in $CHUNK_IN, write_chunk out $CHUNK_OUT, inline in $INLINE_IN bytes"
}

chk_inline_8k() {
    run_io 8192 8k || return 1
    [ "$CHUNK_IN" = 0 ] && [ "$CHUNK_OUT" = 0 ] && [ "$INLINE_IN" -ge $((1 << 20)) ]
}
chk_inline_4k() {
    run_io 4096 4k || return 1
    [ "$CHUNK_IN" -ge $((1 << 20)) ] && [ "$CHUNK_OUT" -ge $((1 << 20)) ]
}
check inline_8k chk_inline_8k
check inline_4k_control chk_inline_4k
echo 4096 > /proc/sys/sunrpc/rdma_max_inline_write
echo 4096 > /proc/sys/sunrpc/rdma_max_inline_read
kill -0 "$GW_PID" 2>/dev/null || { result gw_alive FAIL 0 "the gateway died"; FAILS=$((FAILS + 1)); }
[ "$FAILS" = 0 ] || { dmesg | tail -40; tail -n 30 "$OUT/gateway.log"; }
stop_bg
exit $((FAILS > 0))
