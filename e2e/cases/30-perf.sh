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
# Where the guest's CPU went during each job: one PERFCPU line per job in
# cpu.txt (busy/user/system/softirq % of all vCPUs and the gateway's share
# of one vCPU, from tick-based /proc/stat accounting: on a loaded host it
# read about half the non-idle share perf's samples show, so compare the
# transports with each other), and for a gateway one PERFLAT line: the
# mean time a call spent in it (complete call to reply handed to RDMA)
# and the mean backend round trip within that, from its /metrics
# latency histograms; with E2E_PERF_PROFILE=1 (and perf(1)
# installed) also a guest-wide profile of each job (perf record -a -g at
# 99 Hz: the kernel client, rxe, knfsd and the gateway together; Go's own
# profiler gets almost no samples in a TCG guest) as
# perf-<transport>-<workload>.data with the guest's kallsyms, read on the
# host (a report in the guest costs ~15 s a job):
#   perf report -i perf-gw-seqread.data --kallsyms kallsyms --no-children --sort comm,dso,sym -g none
# It is off by default: perf's start-up adds ~15 s to every job under TCG.
# Two comparisons in the same run, off by default:
#   E2E_PERF_GW_PROCS=N   a second gateway (transport gwp) on 20051 with
#                         runtime.procs N, beside the default one: its
#                         column and gwp/rdma in the table
#   E2E_PERF_CUT_THROUGH=S  the same second gateway with rdma.cut_through S
#                         (0: off; with E2E_PERF_GW_PROCS, both)
#   E2E_PERF_INLINE=B     both RDMA paths with inline thresholds of B bytes:
#                         the client's sunrpc.rdma_max_inline_read/write and
#                         the gateways' rdma.inline_recv/inline_send (knfsd
#                         takes the client's; a 4 KiB I/O needs 8192 to go
#                         without chunks, as in 22-inline)
# e2e-timeout: 600  (run.sh: limit for this case's guest)
. "$E2E_VM/lib.sh"
SECS=${E2E_PERF_SECS:-10}
SIZE=${E2E_PERF_MIB:-128}
command -v fio > /dev/null || { result perf SKIP 0 "fio not installed"; exit 0; }
tstep setup_rxe setup_rxe dummy || lab_fail "setup_rxe"
tstep setup_knfsd setup_knfsd rdma || lab_fail "setup_knfsd"
declare -A BW IOPS LINV GWPID CORES GWCORES
transports="tcp rdma"
INLINE=${E2E_PERF_INLINE:-}
if [ -n "$INLINE" ]; then
    modprobe rpcrdma || lab_fail "rpcrdma module"
    echo "$INLINE" > /proc/sys/sunrpc/rdma_max_inline_write && echo "$INLINE" > /proc/sys/sunrpc/rdma_max_inline_read ||
        lab_fail "sunrpc.rdma_max_inline_read/write $INLINE"
    GW_FW_RDMA_CONF="  inline_recv: $INLINE
  inline_send: $INLINE"
fi
if gw_binary > /dev/null; then
    if GW_PORT=20050 start_gateway; then transports="$transports gw"; GWPID[gw]=$GW_PID
    else result perf_gw FAIL 0 "gateway did not start"; FAILS=$((FAILS + 1)); fi
    if [ -n "${E2E_PERF_GW_PROCS:-}${E2E_PERF_CUT_THROUGH:-}" ]; then
        GWP_LABEL="gateway${E2E_PERF_GW_PROCS:+ procs $E2E_PERF_GW_PROCS}${E2E_PERF_CUT_THROUGH:+ cut $E2E_PERF_CUT_THROUGH}"
        [ -n "${E2E_PERF_GW_PROCS:-}" ] && GW_EXTRA_CONF="runtime:
  procs: $E2E_PERF_GW_PROCS"
        rdma_conf=${GW_FW_RDMA_CONF:-}
        [ -n "${E2E_PERF_CUT_THROUGH:-}" ] && GW_FW_RDMA_CONF="${rdma_conf:+$rdma_conf
}  cut_through: $E2E_PERF_CUT_THROUGH"
        if GW_NAME=gwp GW_PORT=20051 GW_METRICS=127.0.0.1:9465 start_gateway; then transports="$transports gwp"; GWPID[gwp]=$GW_PID
        else result perf_gwp FAIL 0 "$GWP_LABEL did not start"; FAILS=$((FAILS + 1)); fi
        GW_FW_RDMA_CONF=$rdma_conf
        unset GW_EXTRA_CONF
    fi
else
    echo "gateway not built: no gw column"
fi

# cpu_ticks [PID]: "busy user system softirq total" jiffies of all vCPUs
# from /proc/stat, then PID's utime+stime (0 without PID)
cpu_ticks() {
    awk '$1 == "cpu" { print $2+$3+$4+$7+$8, $2+$3, $4, $8, $2+$3+$4+$5+$6+$7+$8 }' /proc/stat | tr '\n' ' '
    if [ -n "${1:-}" ]; then awk '{ print $14+$15 }' "/proc/$1/stat" 2>/dev/null || echo 0; else echo 0; fi
}

# cpu_delta BEFORE AFTER: "busy user system softirq gateway" over the
# job, in cores (1.5: one and a half vCPUs busy on average; a user-space
# gateway's time counts in user/sys, rxe's work in softirq or in the
# caller's sys)
cpu_delta() {
    echo "$1 $2" | awk -v n="$(nproc)" '{ tot = $11 - $5; if (tot <= 0) tot = 1
        printf "%.6f %.6f %.6f %.6f %.6f\n", n*($7-$1)/tot, n*($8-$2)/tot, n*($9-$3)/tot, n*($10-$4)/tot, n*($12-$6)/tot }'
}

# cpu_report T W DELTA: one PERFCPU line from cpu_delta's answer, % of all
# vCPUs and the gateway's % of one
cpu_report() {
    echo "$1 $2 $3" | awk -v n="$(nproc)" '{
        printf "PERFCPU %-4s %-9s busy %3.0f%% user %3.0f%% sys %3.0f%% softirq %3.0f%% of %d vCPU, gateway %3.0f%% of one\n",
            $1, $2, 100*$3/n, 100*$4/n, 100*$5/n, 100*$6/n, n, 100*$7 }'
}

# lat_sums ADDR: "calls call_s backend_calls backend_s" from the
# gateway's /metrics at ADDR (its call and backend latency histograms,
# label sets summed), or nothing
lat_sums() {
    curl -sf "http://$1/metrics" | awk '
        /^rdmagw_call_latency_seconds_count/ { cc += $2 } /^rdmagw_call_latency_seconds_sum/ { cs += $2 }
        /^rdmagw_backend_latency_seconds_count/ { bc += $2 } /^rdmagw_backend_latency_seconds_sum/ { bs += $2 }
        END { if (cc + bc > 0) print cc, cs, bc, bs }'
}

# lat_report T W BEFORE AFTER: one PERFLAT line, where a call's time went
# while it was the gateway's: the mean time from a complete call to its
# reply handed to RDMA, and within it the mean backend round trip (fio's
# completion latency in fio-perf.txt is the whole of it, client included)
lat_report() {
    [ -n "$3" ] && [ -n "$4" ] || return 0
    echo "$1 $2 $3 $4" | awk '{
        c = $7 - $3; b = $9 - $5; if (c <= 0 || b <= 0) exit
        printf "PERFLAT %-4s %-9s calls %d: in the gateway %.0f us mean, of it backend %.0f us mean\n",
            $1, $2, c, 1e6 * ($8 - $4) / c, 1e6 * ($10 - $6) / b }'
}

# run_fio T W: one workload on the mount of transport T; fills BW/IOPS
run_fio() {
    local t=$1 w=$2 f=/mnt/perf_$1/perf.bin rw bs qd out fld c0 c1 d prof
    case $w in
        seqwrite) rw=write bs=1M qd=8 ;;
        seqread)  rw=read  bs=1M qd=8 ;;
        randread) rw=randread bs=4k qd=16 ;;
    esac
    [ "$rw" = write ] && fld=47 || fld=6
    drop_caches
    # perf wraps fio so the profile covers the job (-B -N: no build-id
    # pass over every binary at the end, which takes long over 9p)
    prof=()
    if [ "${E2E_PERF_PROFILE:-0}" = 1 ] && command -v perf > /dev/null; then
        prof=(perf record -q -a -g -F 99 -B -N -o "/tmp/perf-$t-$w.data" --)
    fi
    local maddr="" l0="" l1=""
    case $t in gw) maddr=$GW_METRICS ;; gwp) maddr=127.0.0.1:9465 ;; esac
    [ -z "$maddr" ] || l0=$(lat_sums "$maddr")
    c0=$(cpu_ticks "${GWPID[$t]:-}")
    out=$(timeout $((SECS + 120)) "${prof[@]}" fio --name="$t-$w" --filename="$f" --size="${SIZE}M" \
        --rw="$rw" --bs="$bs" --iodepth="$qd" --ioengine=libaio --direct=1 \
        --fallocate=none --time_based --runtime="$SECS" --ramp_time=1 --minimal 2>> "$OUT/fio-perf.err") ||
        { echo "fio $t $w failed"; return 1; }
    c1=$(cpu_ticks "${GWPID[$t]:-}")
    [ ${#prof[@]} = 0 ] || mv "/tmp/perf-$t-$w.data" "$OUT/"
    d=$(cpu_delta "$c0" "$c1")
    cpu_report "$t" "$w" "$d" | tee -a "$OUT/cpu.txt"
    read -r "CORES[$t.$w]" _ _ _ "GWCORES[$t.$w]" <<< "$d"
    [ -z "$maddr" ] || { l1=$(lat_sums "$maddr"); lat_report "$t" "$w" "$l0" "$l1" | tee -a "$OUT/cpu.txt"; }
    echo "$out" >> "$OUT/fio-perf.txt"
    BW[$t.$w]=$(echo "$out" | awk -F';' -v f="$fld" '{printf "%.1f", $(f+1)/1024}')
    IOPS[$t.$w]=$(echo "$out" | awk -F';' -v f="$fld" '{printf "%.0f", $(f+2)}')
    echo "  $t $w: ${BW[$t.$w]} MiB/s ${IOPS[$t.$w]} IOPS"
}

[ "${E2E_PERF_PROFILE:-0}" != 1 ] || ! command -v perf > /dev/null || cp /proc/kallsyms "$OUT/kallsyms"
t0=$(now)
for t in $transports; do
    case $t in
        tcp)  opts="vers=4.1,proto=tcp" ;;
        rdma) opts="vers=4.1,proto=rdma,port=20049" ;;
        gw)   opts="vers=4.1,proto=rdma,port=20050" ;;
        gwp)  opts="vers=4.1,proto=rdma,port=20051" ;;
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
# cpu_per_op CORES OPS: microseconds of CPU per operation, CORES busy at
# OPS operations a second; "-" when the job did not run
cpu_per_op() {
    awk -v c="${1:-}" -v o="${2:-}" 'BEGIN{ if (c == "" || o+0 == 0) print "-"; else printf "%.0f", 1e6*c/o }'
}
# ahead ADDR: MiB of READ data the gateway with metrics at ADDR wrote
# ahead of its replies (rdma.cut_through), "-" if it does not answer
ahead() { curl -sf "http://$1/metrics" | awk '/^rdmagw_reply_bytes_written_ahead_total/ { s += $2; n++ }
    END { if (n) printf "%.0f", s / 1048576; else print "-" }'; }
{
    echo "PERF fio direct I/O, NFSv4.1, ${SECS}s per workload, guest under $(grep -q hypervisor /proc/cpuinfo && echo QEMU) $(nproc) vCPU${INLINE:+, inline thresholds $INLINE on both RDMA paths}"
    printf 'PERF %-22s %10s %10s %10s %9s %9s %9s\n' workload tcp rdma gw rdma/tcp gw/rdma gw/tcp
    for w in seqwrite seqread randread; do
        if [ $w = randread ]; then label="4KiB randread (IOPS)"
            x=${IOPS[tcp.$w]:-} y=${IOPS[rdma.$w]:-} z=${IOPS[gw.$w]:-}
        else label="1MiB $w (MiB/s)"
            x=${BW[tcp.$w]:-} y=${BW[rdma.$w]:-} z=${BW[gw.$w]:-}; fi
        printf 'PERF %-22s %10s %10s %10s %9s %9s %9s\n' "$label" "${x:--}" "${y:--}" "${z:--}" \
            "$(ratio "$y" "$x")" "$(ratio "$z" "$y")" "$(ratio "$z" "$x")"
    done
    # The guest's CPU per operation (all vCPUs' busy time over the job,
    # tick-based, divided by the job's ops: fio, the kernel client, rxe,
    # knfsd and the gateway together), of it the gateway process's, and
    # the ratio of the two paths' costs: what gw/rdma would be if both ran
    # the guest's vCPUs flat out. A gateway path costs about the RDMA
    # path's work plus the TCP path's (its client side and knfsd's NFS work
    # once): where the table's ratio is below a target, the target is
    # beyond this lab's CPU, whatever the gateway's latency.
    printf 'PERF %-22s %10s %10s %10s %9s %9s\n' "guest CPU per op (us)" tcp rdma gw "gw itself" "rdma/gw"
    for w in seqwrite seqread randread; do
        x=$(cpu_per_op "${CORES[tcp.$w]:-}" "${IOPS[tcp.$w]:-}") y=$(cpu_per_op "${CORES[rdma.$w]:-}" "${IOPS[rdma.$w]:-}")
        z=$(cpu_per_op "${CORES[gw.$w]:-}" "${IOPS[gw.$w]:-}") g=$(cpu_per_op "${GWCORES[gw.$w]:-}" "${IOPS[gw.$w]:-}")
        printf 'PERF %-22s %10s %10s %10s %9s %9s\n' "$w" "$x" "$y" "$z" "$g" "$(ratio "$y" "$z")"
    done
    # Send With Invalidate spares the client these (svcrdma and rdmagw both use it)
    printf 'PERF %-22s %10s %10s %10s\n' "LOCAL_INV/chunked RPC" - "${LINV[rdma]:--}" "${LINV[gw]:--}"
    if [ -n "${GWPID[gwp]:-}" ]; then
        printf 'PERF %-22s %10s %10s %10s %9s\n' "$GWP_LABEL" rdma gw gwp gwp/rdma
        for w in seqwrite seqread randread; do
            if [ $w = randread ]; then label="4KiB randread (IOPS)"; y=${IOPS[rdma.$w]:-} z=${IOPS[gw.$w]:-} p=${IOPS[gwp.$w]:-}
            else label="1MiB $w (MiB/s)"; y=${BW[rdma.$w]:-} z=${BW[gw.$w]:-} p=${BW[gwp.$w]:-}; fi
            printf 'PERF %-22s %10s %10s %10s %9s\n' "$label" "${y:--}" "${z:--}" "${p:--}" "$(ratio "$p" "$y")"
        done
        printf 'PERF %-22s %10s %10s %10s\n' "MiB written ahead" - "$(ahead "$GW_METRICS")" "$(ahead 127.0.0.1:9465)"
    fi
} | tee "$OUT/perf.txt"
if [ "$FAILS" = 0 ]; then result perf PASS "$(elapsed "$t0")" "benchmark (see table)"
else result perf FAIL "$(elapsed "$t0")" "$FAILS workload(s) failed"; fi
if [ -n "$INLINE" ]; then
    echo 4096 > /proc/sys/sunrpc/rdma_max_inline_write
    echo 4096 > /proc/sys/sunrpc/rdma_max_inline_read
fi
stop_bg
exit $((FAILS > 0))
