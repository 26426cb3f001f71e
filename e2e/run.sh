#!/bin/bash
# run.sh - the kernel lab end to end: build the guest once, build the
# gateway, run every case in e2e/cases/ in its own guest, print the case
# table with timings (and the performance table), exit non-zero on any FAIL.
#
#   e2e/run.sh [PATTERN...]      run the cases whose file name contains a PATTERN
#                                (default: all e2e/cases/[0-9][0-9]-*.sh)
#
# A lab failure (the guest did not boot, printed no RDMAVM_RC line, timed
# out before the case reported any check, or the case's own setup of
# rxe/knfsd failed: exit 100) is reported as LAB-FAIL, distinct from a test
# FAIL, and retried once. A time-out after the case began reporting checks
# is a hang of the thing under test: FAIL (timeout), not retried, unless
# the case names a known lab hang with a "# e2e-retry-on-hang: WHY" line:
# then it gets one more guest, and the table says why.
#
# Environment:
#   E2E_OUT       results (default /tmp/rdmagw-e2e/out; wiped at start):
#                 <case>/console.log, results.txt, dmesg.txt, daemon logs
#   E2E_CACHE     kernel, busybox, initramfs (default /var/tmp/rdmagw-e2e)
#   KVER          guest kernel (default: what linux-image-amd64 depends on)
#   E2E_TIMEOUT   per-guest limit in seconds (default 900; a case can lower
#                 or raise it with a "# e2e-timeout: N" line)
#   E2E_GW_BIN    gateway binary (default bin/rdmagw-ibverbs, built here
#                 with `make build-ibverbs`; E2E_NO_GW_BUILD=1 skips the build)
#   E2E_VERSIONS  NFS versions of the data suites (default "3 4.0 4.1 4.2")
#   E2E_BASELINE_VERSIONS  the same for 10-baseline-rdma and 11-baseline-tcp
#                 only (default: E2E_VERSIONS; .ci/run: "3 4.1")
#   E2E_DATA_MIB, E2E_FIO_MIB, E2E_PERF_SECS   sizes and durations
#   E2E_PERF_PROFILE=1  30-perf: a guest-wide perf record per fio job
#   E2E_PERF_GW_PROCS=N, E2E_PERF_CUT_THROUGH=S, E2E_PERF_INLINE=B
#                 30-perf: a second gateway at runtime.procs N and/or
#                 rdma.cut_through S; inline thresholds B on both RDMA paths
#   E2E_FO_VERSIONS, E2E_FO_MIB, E2E_FO_OPTS   60-failover: versions, file
#                 size, extra mount options (e.g. timeo=100)
#   E2E_SIW_SKIP=1  skip 70-siw; E2E_SIW_VERSIONS, E2E_SIW_DATA_MIB,
#                 E2E_SIW_SUITE_SKIP, E2E_SIW_RV_VERSIONS, E2E_SIW_INTEROP_RUN,
#                 E2E_SIW_INTEROP_TIMEOUT, E2E_SIW_PARTS
#                 size it (see the case's header)
#   E2E_WAIT_QEMU=1   before each guest, wait (up to 15 min) while another
#                 qemu-system process runs on this host (shared CI hosts)
set -uo pipefail
E2E=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$E2E/.." && pwd)
export E2E_CACHE=${E2E_CACHE:-/var/tmp/rdmagw-e2e}
OUTROOT=${E2E_OUT:-/tmp/rdmagw-e2e/out}
T0=$SECONDS

# ---------------------------------------------------------------- build ----
echo "== building the guest"
"$E2E/vm/build-guest.sh" || { echo "e2e: LAB-FAIL: building the guest failed"; exit 2; }
if [ -z "${KVER:-}" ]; then
    KVER=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/{sub("linux-image-","",$2); print $2; exit}')
fi
export KVER
rm -rf "$OUTROOT"; mkdir -p "$OUTROOT"

GW_BIN=${E2E_GW_BIN:-$REPO/bin/rdmagw-ibverbs}
GW_NOTE=""
if [ -z "${E2E_GW_BIN:-}" ] && [ "${E2E_NO_GW_BUILD:-0}" != 1 ]; then
    echo "== building the gateway (make build-ibverbs)"
    if command -v make > /dev/null; then gwbuild=(make -C "$REPO" build-ibverbs)
    else gwbuild=(sh -c "cd '$REPO' && CGO_ENABLED=1 go build -tags ibverbs -o bin/rdmagw-ibverbs ./cmd/rdmagw"); fi
    if ! "${gwbuild[@]}" > "$OUTROOT/build-ibverbs.log" 2>&1; then
        tail -5 "$OUTROOT/build-ibverbs.log"
        GW_NOTE="gateway build failed (see $OUTROOT/build-ibverbs.log)"
        GW_BIN=$OUTROOT/no-gateway   # never a stale binary
    fi
fi
if [ -z "$GW_NOTE" ] && ! { [ -x "$GW_BIN" ] && "$GW_BIN" help 2>/dev/null | grep -w serve > /dev/null; }; then
    GW_NOTE="$GW_BIN has no serve subcommand yet"
fi
[ -z "$GW_NOTE" ] || echo "== note: $GW_NOTE: the gateway cases skip"
# the cases' helpers, e2e/tools/<name> -> bin/<name> (as `make lab-tools`)
echo "== building the lab tools"
for d in "$E2E"/tools/*/; do
    t=$(basename "$d")
    (cd "$REPO" && CGO_ENABLED=0 go build -o "bin/$t" "./e2e/tools/$t") >> "$OUTROOT/build-tools.log" 2>&1 ||
        { tail -5 "$OUTROOT/build-tools.log"; echo "e2e: LAB-FAIL: building e2e/tools/$t failed"; exit 2; }
done
# 70-siw's interop test binary: the pure-Go provider against siw through
# the ibverbs provider (cgo); without it the case reports siw_interop SKIP
rm -f "$REPO/bin/iwarp-siw.test"
(cd "$REPO" && CGO_ENABLED=1 go test -c -tags ibverbs -o bin/iwarp-siw.test ./verbs/iwarp/) >> "$OUTROOT/build-tools.log" 2>&1 ||
    { tail -5 "$OUTROOT/build-tools.log"; echo "== note: building bin/iwarp-siw.test failed"; }

# ---------------------------------------------------------------- cases ----
cases=()
for f in "$E2E"/cases/[0-9][0-9]-*.sh; do
    [ $# = 0 ] && { cases+=("$f"); continue; }
    for p in "$@"; do case $(basename "$f") in *"$p"*) cases+=("$f"); break ;; esac; done
done
[ ${#cases[@]} -gt 0 ] || { echo "e2e: no case matches: $*"; exit 2; }

wait_qemu() {
    [ "${E2E_WAIT_QEMU:-0}" = 1 ] || return 0
    local n=0
    while pgrep -x qemu-system-x86 > /dev/null || pgrep -f '^qemu-system-x86_64 ' > /dev/null; do
        [ $n = 0 ] && echo "   (another QEMU guest is running: waiting)"
        n=$((n + 1)); [ $n -le 45 ] || break
        sleep 20
    done
}

# classify DIR RC: LAB-FAIL | FAIL | SKIP | PASS
classify() {
    local d=$1 rc=$2
    if [ "$rc" = 124 ] && grep -q '^RESULT ' "$d/results.txt" 2>/dev/null; then
        echo FAIL     # the case was running its checks and hung: a test failure
    elif ! grep -q '^RDMAVM_BOOTED' "$d/console.log" 2>/dev/null ||
       ! grep -q '^RDMAVM_RC=' "$d/console.log" 2>/dev/null ||
       [ "$rc" = 124 ] || [ "$rc" = 125 ] || [ "$rc" = 126 ] || [ "$rc" = 100 ]; then
        echo LAB-FAIL
    elif [ "$rc" != 0 ] || grep -q '^RESULT [^ ]* FAIL' "$d/results.txt" 2>/dev/null; then
        echo FAIL
    elif ! grep -q '^RESULT [^ ]* PASS' "$d/results.txt" 2>/dev/null; then
        echo SKIP
    else
        echo PASS
    fi
}

rows=(); bad=0
for f in "${cases[@]}"; do
    name=$(basename "$f" .sh)
    tmo=$(sed -n 's/^# e2e-timeout: *\([0-9]*\).*/\1/p' "$f" | head -1)
    tmo=${E2E_TIMEOUT:-${tmo:-900}}
    hangwhy=$(sed -n 's/^# e2e-retry-on-hang: *//p' "$f" | head -1)
    retried=""
    for attempt in 1 2; do
        d=$OUTROOT/$name; [ $attempt = 1 ] || { mv "$d" "$d.attempt1"; }
        wait_qemu
        echo "== $name (attempt $attempt, limit ${tmo}s)"
        t=$SECONDS
        "$E2E/vm/run-guest.sh" -q -t "$tmo" -o "$d" -e "E2E_GW_BIN=$GW_BIN" \
            ${E2E_VERSIONS:+-e "E2E_VERSIONS=$E2E_VERSIONS"} \
            ${E2E_BASELINE_VERSIONS:+-e "E2E_BASELINE_VERSIONS=$E2E_BASELINE_VERSIONS"} \
            ${E2E_DATA_MIB:+-e "E2E_DATA_MIB=$E2E_DATA_MIB"} \
            ${E2E_FIO_MIB:+-e "E2E_FIO_MIB=$E2E_FIO_MIB"} \
            ${E2E_PERF_SECS:+-e "E2E_PERF_SECS=$E2E_PERF_SECS"} \
            ${E2E_PERF_PROFILE:+-e "E2E_PERF_PROFILE=$E2E_PERF_PROFILE"} \
            ${E2E_PERF_GW_PROCS:+-e "E2E_PERF_GW_PROCS=$E2E_PERF_GW_PROCS"} \
            ${E2E_PERF_INLINE:+-e "E2E_PERF_INLINE=$E2E_PERF_INLINE"} \
            ${E2E_PERF_CUT_THROUGH:+-e "E2E_PERF_CUT_THROUGH=$E2E_PERF_CUT_THROUGH"} \
            ${E2E_DELEG_VERSIONS+-e "E2E_DELEG_VERSIONS=$E2E_DELEG_VERSIONS"} \
            ${E2E_DELEG_REVERSE_VERSIONS+-e "E2E_DELEG_REVERSE_VERSIONS=$E2E_DELEG_REVERSE_VERSIONS"} \
            ${E2E_FO_VERSIONS+-e "E2E_FO_VERSIONS=$E2E_FO_VERSIONS"} \
            ${E2E_FO_MIB:+-e "E2E_FO_MIB=$E2E_FO_MIB"} \
            ${E2E_FO_OPTS:+-e "E2E_FO_OPTS=$E2E_FO_OPTS"} \
            ${E2E_SIW_SKIP:+-e "E2E_SIW_SKIP=$E2E_SIW_SKIP"} \
            ${E2E_SIW_VERSIONS:+-e "E2E_SIW_VERSIONS=$E2E_SIW_VERSIONS"} \
            ${E2E_SIW_DATA_MIB:+-e "E2E_SIW_DATA_MIB=$E2E_SIW_DATA_MIB"} \
            ${E2E_SIW_SUITE_SKIP+-e "E2E_SIW_SUITE_SKIP=$E2E_SIW_SUITE_SKIP"} \
            ${E2E_SIW_RV_VERSIONS:+-e "E2E_SIW_RV_VERSIONS=$E2E_SIW_RV_VERSIONS"} \
            ${E2E_SIW_INTEROP_RUN:+-e "E2E_SIW_INTEROP_RUN=$E2E_SIW_INTEROP_RUN"} \
            ${E2E_SIW_INTEROP_TIMEOUT:+-e "E2E_SIW_INTEROP_TIMEOUT=$E2E_SIW_INTEROP_TIMEOUT"} \
            ${E2E_SIW_PARTS:+-e "E2E_SIW_PARTS=$E2E_SIW_PARTS"} \
            -- "$f" > "$d.host.log" 2>&1
        rc=$?
        wall=$((SECONDS - t))
        st=$(classify "$d" "$rc")
        grep -E '^(RESULT|LABFAIL)' "$d/console.log" 2>/dev/null | sed 's/^/   /'
        echo "   -> $st rc=$rc ${wall}s"
        if [ "$st" = FAIL ] && [ "$rc" = 124 ] && [ -n "$hangwhy" ] && [ $attempt = 1 ]; then
            retried="retried after a hang ($hangwhy)"
            echo "   lab: $retried"
            continue
        fi
        [ "$st" = LAB-FAIL ] || break
        retried="retried after a lab failure"
        grep -E 'LABFAIL|INITRAMFS|Kernel panic' "$d/console.log" 2>/dev/null | head -3 | sed 's/^/   lab: /'
        tail -1 "$d.host.log" | sed 's/^/   lab: /'
    done
    boot=$(sed -n 's/^RDMAVM_BOOTED uptime=\([0-9.]*\)s.*/\1/p' "$d/console.log" 2>/dev/null | head -1)
    np=$(grep -c '^RESULT [^ ]* PASS' "$d/results.txt" 2>/dev/null); nf=$(grep -c '^RESULT [^ ]* FAIL' "$d/results.txt" 2>/dev/null)
    ns=$(grep -c '^RESULT [^ ]* SKIP' "$d/results.txt" 2>/dev/null)
    note=""; [ "$st" = SKIP ] && note=$(sed -n 's/^RESULT [^ ]* SKIP [0-9.]* //p' "$d/results.txt" | head -1)
    [ "$st" = FAIL ] && [ "$rc" = 124 ] && note="timed out after ${tmo}s (hang)"
    [ $attempt = 2 ] && note="$retried${note:+; $note}"
    rows+=("$(printf '| %-18s | %-8s | %6ss | %6s | %4s | %4s | %4s | %s' "$name" "$st" "$wall" "${boot:+${boot}s}" "${np:-0}" "${nf:-0}" "${ns:-0}" "$note")")
    case $st in PASS|SKIP) ;; *) bad=$((bad + 1)) ;; esac
done

# ---------------------------------------------------------------- table ----
echo
echo "== checks"
for f in "${cases[@]}"; do
    name=$(basename "$f" .sh)
    [ -s "$OUTROOT/$name/results.txt" ] || continue
    awk -v c="$name" '$1=="RESULT"{ m=""; for (i=5;i<=NF;i++) m=m" "$i; printf "| %-18s | %-26s | %-4s | %7ss |%s\n", c, $2, $3, $4, m }' "$OUTROOT/$name/results.txt"
done
echo
echo "== cases (kernel $KVER, $(nproc) host cores, TCG)"
printf '| %-18s | %-8s | %7s | %6s | %4s | %4s | %4s | %s\n' case status wall boot pass fail skip note
echo "|--------------------|----------|---------|--------|------|------|------|-----"
printf '%s\n' "${rows[@]}"
for f in "${cases[@]}"; do
    p=$OUTROOT/$(basename "$f" .sh)/perf.txt
    [ -s "$p" ] && { echo; echo "== performance"; sed 's/^PERF //' "$p"; }
done
echo
echo "e2e: $(( ${#cases[@]} - bad ))/${#cases[@]} cases ok, total $((SECONDS - T0))s, logs in $OUTROOT${GW_NOTE:+; note: $GW_NOTE}"
[ $bad = 0 ]
