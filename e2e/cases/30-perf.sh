#!/bin/bash
# 30-perf.sh - benchmark, not pass/fail: fio with direct I/O from the guest's
# NFS client (NFSv4.1) to the guest's knfsd
#   tcp   over TCP 2049
#   rdma  over RDMA (rxe) 20049
#   gw    over RDMA (rxe) to rdmagw on 20050 -> knfsd over TCP (when built)
# workloads: 1 MiB sequential write, 1 MiB sequential read (iodepth 8),
# 4 KiB random read (iodepth 16), $E2E_PERF_SECS seconds each. Prints a
# table (MiB/s, IOPS) with the ratios; saved as $OUT/perf.txt.
# Under TCG the absolute numbers are small and noisy; the ratios are the point.
# e2e-timeout: 600  (run.sh: limit for this case's guest)
. "$E2E_VM/lib.sh"
SECS=${E2E_PERF_SECS:-10}
SIZE=${E2E_PERF_MIB:-128}
command -v fio > /dev/null || { result perf SKIP 0 "fio not installed"; exit 0; }
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_knfsd setup_knfsd rdma || lab_fail "setup_knfsd"
declare -A BW IOPS LINV
transports="tcp rdma"
if gw_binary > /dev/null; then
    if GW_PORT=20050 start_gateway; then transports="$transports gw"
    else result perf_gw FAIL 0 "gateway did not start"; FAILS=$((FAILS + 1)); fi
else
    echo "gateway not built: no gw column"
fi

# run_fio T W: one workload on the mount of transport T; fills BW/IOPS
run_fio() {
    local t=$1 w=$2 f=/mnt/perf_$1/perf.bin rw bs qd out fld
    case $w in
        seqwrite) rw=write bs=1M qd=8 ;;
        seqread)  rw=read  bs=1M qd=8 ;;
        randread) rw=randread bs=4k qd=16 ;;
    esac
    [ "$rw" = write ] && fld=47 || fld=6
    drop_caches
    out=$(timeout $((SECS + 120)) fio --name="$t-$w" --filename="$f" --size="${SIZE}M" \
        --rw="$rw" --bs="$bs" --iodepth="$qd" --ioengine=libaio --direct=1 \
        --fallocate=none --time_based --runtime="$SECS" --ramp_time=1 --minimal 2>> "$OUT/fio-perf.err") ||
        { echo "fio $t $w failed"; return 1; }
    echo "$out" >> "$OUT/fio-perf.txt"
    BW[$t.$w]=$(echo "$out" | awk -F';' -v f="$fld" '{printf "%.1f", $(f+1)/1024}')
    IOPS[$t.$w]=$(echo "$out" | awk -F';' -v f="$fld" '{printf "%.0f", $(f+2)}')
    echo "  $t $w: ${BW[$t.$w]} MiB/s ${IOPS[$t.$w]} IOPS"
}

t0=$(now)
for t in $transports; do
    case $t in
        tcp)  opts="vers=4.1,proto=tcp" ;;
        rdma) opts="vers=4.1,proto=rdma,port=20049" ;;
        gw)   opts="vers=4.1,proto=rdma,port=20050" ;;
    esac
    mkdir -p "/mnt/perf_$t"
    timeout 60 mount -t nfs -o "$opts" "$RXE_IP:/" "/mnt/perf_$t" ||
        { result "perf_$t" FAIL 0 "mount failed"; FAILS=$((FAILS + 1)); continue; }
    for w in seqwrite seqread randread; do run_fio "$t" "$w" || FAILS=$((FAILS + 1)); done
    if [ "$t" != tcp ]; then   # the client's LOCAL_INVs per chunked RPC (lib.sh xprt_rdma)
        read -r _ chunked linv < <(xprt_rdma "/mnt/perf_$t")
        LINV[$t]="$linv/$chunked"
    fi
    rm -f "/mnt/perf_$t/perf.bin"
    umount "/mnt/perf_$t"
done

ratio() { awk -v a="${1:-}" -v b="${2:-}" 'BEGIN{ if (a == "" || b == "" || b+0 == 0) print "-"; else printf "%.2f", a/b }'; }
{
    echo "PERF fio direct I/O, NFSv4.1, ${SECS}s per workload, guest under $(grep -q hypervisor /proc/cpuinfo && echo QEMU) $(nproc) vCPU"
    printf 'PERF %-22s %10s %10s %10s %9s %9s %9s\n' workload tcp rdma gw rdma/tcp gw/rdma gw/tcp
    for w in seqwrite seqread randread; do
        if [ $w = randread ]; then label="4KiB randread (IOPS)"
            x=${IOPS[tcp.$w]:-} y=${IOPS[rdma.$w]:-} z=${IOPS[gw.$w]:-}
        else label="1MiB $w (MiB/s)"
            x=${BW[tcp.$w]:-} y=${BW[rdma.$w]:-} z=${BW[gw.$w]:-}; fi
        printf 'PERF %-22s %10s %10s %10s %9s %9s %9s\n' "$label" "${x:--}" "${y:--}" "${z:--}" \
            "$(ratio "$y" "$x")" "$(ratio "$z" "$y")" "$(ratio "$z" "$x")"
    done
    # Send With Invalidate spares the client these (svcrdma and rdmagw both use it)
    printf 'PERF %-22s %10s %10s %10s\n' "LOCAL_INV/chunked RPC" - "${LINV[rdma]:--}" "${LINV[gw]:--}"
} | tee "$OUT/perf.txt"
if [ "$FAILS" = 0 ]; then result perf PASS "$(elapsed "$t0")" "benchmark (see table)"
else result perf FAIL "$(elapsed "$t0")" "$FAILS workload(s) failed"; fi
stop_bg
exit $((FAILS > 0))
