#!/bin/bash
# PID 1 in the guest after switch_root. The root is an overlay of the host's
# / (read-only, 9p) and a tmpfs, so every host binary is there; the kernel is
# the guest's Debian kernel, whose modules are in $E2E_CACHE/kernel.
#
# Runs the command run-guest.sh left in /e2e-out/argv (NUL separated) with
# the environment from /e2e-out/env, prints "RDMAVM_RC=<rc>" on the console,
# stores the rc in /e2e-out/rc, saves dmesg and powers the VM off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8 LC_ALL=C.UTF-8
export OUT=/e2e-out

# (sysrq-o powers off asynchronously; the root may vanish under the sleep)
poweroff_now() { echo; sync; echo o > /proc/sysrq-trigger; sleep 10 2>/dev/null; }
trap poweroff_now EXIT

for a in $(cat /proc/cmdline); do
    case "$a" in e2evm.cache=*) E2E_CACHE=${a#e2evm.cache=} ;; esac
done
export E2E_CACHE

# -- minimal system setup ------------------------------------------------------
mount -t tmpfs -o mode=755 tmpfs /run && mkdir -p /run/lock /run/rpc_pipefs /run/sendsigs.omit.d
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620 devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /var/log
mount -t configfs configfs /sys/kernel/config 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ln -sfn /proc/self/fd /dev/fd; ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout; ln -sfn /proc/self/fd/2 /dev/stderr

# guest kernel modules: /lib is /usr/lib on the host (merged /usr); the
# overlay makes /usr/lib/modules writable in the guest only.
KVER=$(uname -r)
mkdir -p /lib/modules
ln -sfn "$E2E_CACHE/kernel/lib/modules/$KVER" "/lib/modules/$KVER"

hostname e2evm
echo "127.0.0.1 localhost e2evm" > /etc/hosts
ip link set lo up
: > /etc/resolv.conf    # nothing may use the host's DNS (no network anyway)

read -r up _ < /proc/uptime
echo "RDMAVM_BOOTED uptime=${up}s kernel=$KVER cpus=$(nproc) mem=$(awk '/MemTotal/{print $2"kB"}' /proc/meminfo)"

# -- run the requested command -------------------------------------------------
rc=127
if [ -s "$OUT/argv" ]; then
    if [ -s "$OUT/env" ]; then
        while IFS= read -r -d '' kv; do export "$kv"; done < "$OUT/env"
    fi
    mapfile -d '' -t argv < "$OUT/argv"
    cd /root 2>/dev/null || cd /
    "${argv[@]}" < /dev/null
    rc=$?
else
    echo "no $OUT/argv: nothing to run"
fi
read -r up _ < /proc/uptime
dmesg > "$OUT/dmesg.txt" 2>/dev/null
echo "$rc" > "$OUT/rc"
sync
echo "RDMAVM_RC=$rc uptime=${up}s"
