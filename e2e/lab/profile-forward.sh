#!/bin/bash
# profile-forward.sh - where does the forward gateway spend its CPU under
# the kernel client? Boots the lab guest, runs knfsd, the gateway
# (bin/rdmagw-ibverbs, metrics.pprof on) and a kernel NFSv4.1 mount through
# it, drives fio, and takes a CPU profile of the gateway meanwhile.
#
#   e2e/lab/profile-forward.sh            # 4 KiB random reads, iodepth 16
#   FIO_RW=read FIO_BS=1m e2e/lab/profile-forward.sh
#   go tool pprof -top bin/rdmagw-ibverbs /tmp/rdmagw-profile/cpu.pprof
#
# Not a test: it prints fio's IOPS and latency and the top of the profile.
# Under TCG, soft-RoCE does its packet work inside ibv_post_send (the
# doorbell is a system call), so that cgo call weighs far more than on
# hardware; compare the gateway's own functions with each other.
#
# Environment: OUT (default /tmp/rdmagw-profile), FIO_RW (randread),
# FIO_BS (4k), FIO_DEPTH (16), FIO_SECS (25), PROFILE_SECS (15), and what
# e2e/vm/run-guest.sh reads (E2E_CACHE, KVER, E2E_ACCEL).
set -uo pipefail
LAB=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$LAB/../.." && pwd)
OUT=${OUT:-/tmp/rdmagw-profile}
mkdir -p "$OUT"
"$REPO/e2e/vm/build-guest.sh" || { echo "profile-forward: LAB-FAIL: building the guest failed" >&2; exit 2; }
make -C "$REPO" build-ibverbs > "$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 2; }
while pgrep qemu-system-x86 > /dev/null; do
    echo "== waiting for another QEMU guest to finish"
    sleep 20
done
"$REPO/e2e/vm/run-guest.sh" -q -t 600 -o "$OUT/guest" -e "E2E_GW_BIN=$REPO/bin/rdmagw-ibverbs" \
    -e "FIO_RW=${FIO_RW:-randread}" -e "FIO_BS=${FIO_BS:-4k}" -e "FIO_DEPTH=${FIO_DEPTH:-16}" \
    -e "FIO_SECS=${FIO_SECS:-25}" -e "PROFILE_SECS=${PROFILE_SECS:-15}" \
    -- /bin/bash "$LAB/profile-forward-guest.sh"
rc=$?
[ -s "$OUT/guest/cpu.pprof" ] || { echo "profile-forward: no profile (rc $rc); see $OUT/guest/console.log"; exit 1; }
cp "$OUT/guest/cpu.pprof" "$OUT/cpu.pprof"
grep -E "IOPS|clat \(" "$OUT/guest/fio.txt"
go tool pprof -top -nodecount 25 "$REPO/bin/rdmagw-ibverbs" "$OUT/cpu.pprof" 2>/dev/null
echo "profile: $OUT/cpu.pprof (binary: bin/rdmagw-ibverbs)"
