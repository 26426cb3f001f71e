#!/bin/bash
# 40-reverse.sh - the other direction (issue #7), end to end with real Linux
# peers: the guest kernel's NFS client over TCP -> rdmagw reverse (host-built
# bin/rdmagw-ibverbs, listening on TCP 127.0.0.1:2050) -> the guest's knfsd
# over RPC-over-RDMA (svcrdma on rxe0, $RXE_IP:20049; backend.provider
# ibverbs). The same data suite as the forward case on NFSv3 (MOUNT straight
# to knfsd's mountd over TCP: mountport/mountproto=tcp; the reverse gateway
# only carries the NFS port), NFSv4.1 and 4.2. Then the gateway's /metrics,
# reverse-mode directions (out = to the server, in = from it): Read-chunk
# bytes (read_chunk out, the server RDMA-Reads WRITE payloads) must match
# what the case wrote, Write-chunk bytes (write_chunk in, the server
# RDMA-Writes READ results) what it read; backend.rdma_version auto fell
# back to version 1 (knfsd answers ERR_VERS to version 2). Then NFSv3 READDIR with counts
# 3940..3980 through the gateway must match knfsd's direct answer (issue #14:
# replies that fit inline only without the transport header need a Reply
# chunk; e2e/tools/readdirprobe). Last a short benchmark: fio 1 MiB
# sequential write/read, direct I/O, NFSv4.1, through the gateway vs the
# kernel TCP client straight to knfsd over TCP, with the ratio (PERF lines,
# $OUT/perf.txt; not pass/fail).
# Without a gateway binary that has a "serve" subcommand: RESULT reverse SKIP.
# e2e-timeout: 900  (run.sh: limit for this case's guest)
. "$E2E_VM/lib.sh"
VERSIONS=${E2E_VERSIONS:-3 4.1 4.2}
GW_RV_ADDR=127.0.0.1 GW_RV_PORT=2050
SECS=${E2E_PERF_SECS:-5}
need_gateway reverse
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_knfsd setup_knfsd rdma || lab_fail "setup_knfsd"
if ! check gw_start start_gateway_reverse; then stop_bg; exit 1; fi
gw_scrape .start
for v in $VERSIONS; do
    # soft: a stuck gateway must turn into EIO and a FAIL, not a hung task
    opts="vers=$v,proto=tcp,port=$GW_RV_PORT,${E2E_RV_OPTS:-soft,timeo=150,retrans=2}"; path=/
    [ "$v" = 3 ] && { opts="$opts,nolock,mountaddr=$RXE_IP,mountport=$MOUNTD_PORT,mountproto=tcp"; path=$NFS_EXPORT; }
    nfs_suite "rv_v${v/./}" "$GW_RV_ADDR:$path" "$opts"
done

# ---- the gateway's metrics must account for the bytes the case moved ------
check gw_metrics chk_chunk_bytes out in 'bytes_total|gateway_error_replies_total|rdma_errors_received_total|reply_chunk_retries_total|backend_pings_total'
# backend.rdma_version auto (start_gateway_reverse): the gateway offers
# RPC-over-RDMA version 2, knfsd (version 1 only) answers ERR_VERS, and the
# connection goes on in version 1; the data suite above ran over it
check rv_rdma_version chk_rdma_version_v1 fallback

# ---- READDIR replies just under the inline threshold (issue #14) -----------
# knfsd needs a Reply chunk for a reply that fits 4 KiB only without its
# RPC-over-RDMA header; without one it answers ERR_CHUNK and the TCP client
# gets SYSTEM_ERR. readdirprobe READDIRs a directory of 300 files
# with count 3940..3980 through the gateway and straight to knfsd over TCP.
chk_readdir() {
    local d=$NFS_EXPORT/rcsize-probe i
    mkdir -p "$d" || return 1
    # 3-byte names: every entry3 is 28 bytes, so the step-4 counts land a
    # reply in each 28-byte window, also the one a header-blind estimate misses
    (cd "$d" && seq -w 100 399 | xargs touch) || return 1
    timeout 120 "$E2E_REPO/bin/readdirprobe" -gw "$GW_RV_ADDR:$GW_RV_PORT" -direct "$RXE_IP:2049" \
        -mountd "$RXE_IP:$MOUNTD_PORT" -export "$NFS_EXPORT" -dir rcsize-probe -from 3940 -to 3980 -step 4 |
        sed 's/^/  /'
    local rc=${PIPESTATUS[0]}
    rm -rf "$d"
    return "$rc"
}
check rv_v3_readdir_reply_chunk chk_readdir

# ---- performance: through the gateway vs straight to knfsd over TCP --------
declare -A BW
perf_fio() {   # perf_fio T W: 1 MiB seq write|read on /mnt/perf_T
    local t=$1 w=$2 f=/mnt/perf_$1/perf.bin out fld
    [ "$w" = write ] && fld=47 || fld=6
    drop_caches
    out=$(timeout $((SECS + 120)) fio --name="$t-$w" --filename="$f" --size=64M \
        --rw="$w" --bs=1M --iodepth=8 --ioengine=libaio --direct=1 --fallocate=none \
        --time_based --runtime="$SECS" --ramp_time=1 --minimal 2>> "$OUT/fio-perf.err") ||
        { echo "fio $t $w failed"; return 1; }
    echo "$out" >> "$OUT/fio-perf.txt"
    BW[$t.$w]=$(echo "$out" | awk -F';' -v f="$fld" '{printf "%.1f", $(f+1)/1024}')
    echo "  $t seq$w: ${BW[$t.$w]} MiB/s"
}
perf_dd() {    # no fio: dd 64 MiB with direct I/O
    local t=$1 w=$2 f=/mnt/perf_$1/perf.bin t0 s
    drop_caches; t0=$(now)
    if [ "$w" = write ]; then timeout 300 dd if=/tmp/src.dat of="$f" bs=1M count=64 oflag=direct status=none || return 1
    else timeout 300 dd if="$f" of=/dev/null bs=1M iflag=direct status=none || return 1; fi
    s=$(elapsed "$t0"); BW[$t.$w]=$(awk -v s="$s" 'BEGIN{printf "%.1f", 64/(s>0?s:0.1)}')
    echo "  $t seq$w: ${BW[$t.$w]} MiB/s (dd)"
}
chk_perf() {
    local t opts src ok=0 tool=perf_fio
    command -v fio > /dev/null || tool=perf_dd
    for t in gw tcp; do
        case $t in
            gw)  opts="vers=4.1,proto=tcp,port=$GW_RV_PORT"; src=$GW_RV_ADDR:/ ;;
            tcp) opts="vers=4.1,proto=tcp,port=2049"; src=$RXE_IP:/ ;;
        esac
        mkdir -p "/mnt/perf_$t"
        timeout 60 mount -t nfs -o "$opts" "$src" "/mnt/perf_$t" || { echo "mount $t failed"; ok=1; continue; }
        echo "  $t: $(grep " /mnt/perf_$t " /proc/mounts | grep -o 'rsize=[0-9]*,wsize=[0-9]*')"
        $tool "$t" write || ok=1
        $tool "$t" read || ok=1
        rm -f "/mnt/perf_$t/perf.bin"
        timeout 60 umount "/mnt/perf_$t" || ok=1
    done
    ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN{ if (a == "" || b == "" || b+0 == 0) print "-"; else printf "%.2f", a/b }'; }
    {
        echo "PERF reverse: ${tool#perf_} direct I/O, NFSv4.1, ${SECS}s per workload, guest $(nproc) vCPU"
        printf 'PERF %-22s %12s %12s %9s\n' workload "gw(rdma)" "tcp-direct" gw/tcp
        for w in write read; do
            printf 'PERF %-22s %12s %12s %9s\n' "1MiB seq$w (MiB/s)" "${BW[gw.$w]:--}" "${BW[tcp.$w]:--}" \
                "$(ratio "${BW[gw.$w]:-}" "${BW[tcp.$w]:-}")"
        done
    } | tee "$OUT/perf.txt"
    return $ok
}
check rv_perf chk_perf

kill -0 "$GW_PID" 2>/dev/null || { result gw_alive FAIL 0 "the gateway died"; FAILS=$((FAILS + 1)); }
[ "$FAILS" = 0 ] || { dmesg | tail -40; tail -n 30 "$OUT/gateway.log"; }
stop_bg
exit $((FAILS > 0))
