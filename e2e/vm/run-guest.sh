#!/bin/bash
# run-guest.sh - boot the lab guest (QEMU, TCG), run one command in it as
# root, stream the console to a log, collect results, exit with the
# command's exit status.
#
#   e2e/vm/run-guest.sh [-m MiB] [-c cpus] [-t secs] [-o outdir] [-e K=V]... [-q] \
#       -- /abs/path/script.sh [args...]
#
#   -m MiB    guest memory (default 2048)
#   -c cpus   guest CPUs (default 2)
#   -t secs   hard limit for the whole boot+run+poweroff (default 600);
#             QEMU is killed after it and the exit status is 124
#   -o dir    host directory shared read-write as /e2e-out ($OUT in the
#             guest); it gets console.log, dmesg.txt, rc, results.txt and
#             whatever the script writes. Default: a fresh mktemp dir.
#   -e K=V    export K=V to the command in the guest (repeatable)
#   -q        do not echo the console live (still saved to outdir/console.log)
#
# The guest's / is the host's / (read-only 9p) with a tmpfs overlay, so any
# host path works in the guest. No NIC: nothing leaves the guest.
#
# Exit status: the command's rc; 124 on timeout; 125 when the guest died
# without reporting one; 126 when the initramfs could not build the root;
# 2 when the guest could not be built.
# Environment: E2E_CACHE, KVER (see build-guest.sh); E2E_ACCEL (default
# tcg,thread=multi: /dev/kvm is usually absent or unusable in CI);
# E2E_QEMU_EXTRA (extra QEMU args, word-split); E2E_KERNEL_EXTRA (kernel
# command line additions, default "clocksource=tsc tsc=reliable": the
# kernel otherwise picks HPET under TCG, which the vDSO cannot read, so
# every clock read is a system call; set it empty to get that back).
set -uo pipefail
VM=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$VM/../.." && pwd)
E2E_CACHE=${E2E_CACHE:-/var/tmp/rdmagw-e2e}
MEM=2048 CPUS=2 TMO=600 OUTDIR= QUIET=0 ENVS=()
usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while getopts "m:c:t:o:e:qh" opt; do
    case $opt in
        m) MEM=$OPTARG ;; c) CPUS=$OPTARG ;; t) TMO=$OPTARG ;; o) OUTDIR=$OPTARG ;;
        e) ENVS+=("$OPTARG") ;; q) QUIET=1 ;; *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage

if [ -z "${KVER:-}" ]; then
    KVER=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/{sub("linux-image-","",$2); print $2; exit}')
fi
export KVER E2E_CACHE
KERNEL=$E2E_CACHE/kernel/boot/vmlinuz-$KVER INITRD=$E2E_CACHE/initramfs-$KVER.cpio.gz
if [ -z "$KVER" ] || [ ! -f "$INITRD" ] || [ ! -f "$KERNEL" ]; then
    "$VM/build-guest.sh" >&2 || exit 2
    [ -n "$KVER" ] || KVER=$(ls "$E2E_CACHE"/kernel/boot/ | sed -n 's/^vmlinuz-//p' | head -1)
    KERNEL=$E2E_CACHE/kernel/boot/vmlinuz-$KVER INITRD=$E2E_CACHE/initramfs-$KVER.cpio.gz
fi

if [ -z "$OUTDIR" ]; then OUTDIR=$(mktemp -d /tmp/e2e-out.XXXXXX); fi
mkdir -p "$OUTDIR"; OUTDIR=$(cd "$OUTDIR" && pwd)
rm -f "$OUTDIR"/{rc,argv,env,console.log,dmesg.txt,results.txt}

# argv and environment for the guest, NUL separated; the program as an
# absolute path (the guest sees the host's / so the same path works there)
prog=$1; shift
if [ -e "$prog" ]; then prog=$(realpath "$prog"); fi
printf '%s\0' "$prog" "$@" > "$OUTDIR/argv"
printf '%s\0' "E2E_REPO=$REPO" "E2E_VM=$VM" "${ENVS[@]}" > "$OUTDIR/env"

# shellcheck disable=SC2206
extra=(${E2E_QEMU_EXTRA:-})
t0=$(date +%s.%N)
# multidevs=remap: the host / spans several filesystems; avoid inode clashes.
timeout --kill-after=10 "$TMO" qemu-system-x86_64 \
    -accel "${E2E_ACCEL:-tcg,thread=multi}" -cpu "${E2E_CPU:-max}" -smp "$CPUS" -m "$MEM" \
    -nodefaults -no-user-config -display none -monitor none -serial stdio -no-reboot \
    -kernel "$KERNEL" -initrd "$INITRD" \
    -append "console=ttyS0 quiet panic=-1 ${E2E_KERNEL_EXTRA-clocksource=tsc tsc=reliable} e2evm.init=$VM/guest/guest-init.sh e2evm.cache=$E2E_CACHE" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap,id=hostroot \
    -virtfs local,path="$OUTDIR",mount_tag=e2e_out,security_model=none,id=e2e_out \
    "${extra[@]}" < /dev/null 2>&1 \
    | sed -u 's/\r//g' | if [ $QUIET = 1 ]; then cat > "$OUTDIR/console.log"; else tee "$OUTDIR/console.log"; fi
qrc=${PIPESTATUS[0]}
t1=$(date +%s.%N)

if [ -s "$OUTDIR/rc" ]; then rc=$(cat "$OUTDIR/rc")
elif [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then rc=124
elif grep -q '^RDMAVM_RC=126' "$OUTDIR/console.log" 2>/dev/null; then rc=126
else rc=125; fi
printf 'RDMAVM host: rc=%s qemu_rc=%s wall=%.1fs out=%s\n' "$rc" "$qrc" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$OUTDIR" >&2
exit "$rc"
