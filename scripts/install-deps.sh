#!/bin/bash
# install-deps.sh - install the Debian 12 packages rdmagw's tests and lab need.
#
#   scripts/install-deps.sh [--test|--lab|--all] [--dry-run]
#
#   --test  (default) real-peer tests over TCP and packet decoding:
#           tshark tcpdump nfs-ganesha(+vfs, mem, proxy-v4) libnfs-utils libnfs-dev
#           plus the C toolchain for cgo / libnfs probes (gcc libc6-dev pkg-config)
#           and prometheus (for promtool, which checks deploy/prometheus rules)
#           and rpcsvc-proto libtirpc-dev (rpcgen and the XDR library that build
#           the rpcgen judge of the version-two codec, rdmarpc/v2_judge_test.go)
#           and haproxy (the TCP relay `rdmagw bench -relay haproxy` compares with)
#   --lab   the rdmavm QEMU lab host side (see /work/shared/rdmavm/README.md):
#           qemu-system-x86 cpio kmod xz-utils rdma-core ibverbs-providers
#           ibverbs-utils librdmacm1 rdmacm-utils perftest infiniband-diags
#           iproute2 nfs-kernel-server nfs-common rpcbind libibverbs-dev
#           librdmacm-dev busybox-static fio (+ gcc libc6-dev pkg-config for cgo)
#           keepalived (VRRP for the failover case, e2e/cases/60-failover.sh)
#           linux-perf (30-perf's per-job profile of the guest)
#           make gcc-12 (siw.ko, built out of tree for the guest kernel from
#           linux-source/linux-headers .debs that build-guest.sh downloads)
#           tcpdump tshark (70-siw decodes the siw traffic)
#   --all   both
#   --dry-run  only print what is missing
#
# Idempotent. Fast path: when every package is installed (dpkg-query) it does
# nothing, not even `apt-get update`. `apt-get update` runs at most once, and
# only when something is missing. When not root it prints the missing packages
# and the command to run, and exits 0.
# The guest kernel .deb (linux-image-$KVER) is NOT installed here: the lab's
# build-initramfs.sh fetches it with `apt-get download`.
set -euo pipefail

TEST_PKGS=(tshark tcpdump nfs-ganesha nfs-ganesha-vfs nfs-ganesha-mem
           nfs-ganesha-proxy-v4 libnfs-utils libnfs-dev
           gcc libc6-dev pkg-config python3
           prometheus    # promtool: checks and unit-tests deploy/prometheus rules
           rpcsvc-proto libtirpc-dev   # rpcgen + XDR library: the RPC-over-RDMA v2 judge (rdmarpc)
           haproxy)      # rdmagw bench -relay haproxy: the TCP relay the gateway is compared with
LAB_PKGS=(qemu-system-x86 cpio kmod xz-utils rdma-core ibverbs-providers
          ibverbs-utils librdmacm1 rdmacm-utils perftest infiniband-diags
          iproute2 nfs-kernel-server nfs-common rpcbind libibverbs-dev
          librdmacm-dev busybox-static gcc libc6-dev pkg-config fio
          keepalived    # 60-failover: the VIP between two gateways
          make gcc-12   # siw.ko for the guest kernel (e2e/vm/build-guest.sh)
          tcpdump tshark    # 70-siw: the siw traffic decoded
          linux-perf)   # 30-perf: a guest-wide profile per fio job

mode=test dry=0
for a in "$@"; do
    case "$a" in
        --test) mode=test ;;
        --lab)  mode=lab ;;
        --all)  mode=all ;;
        --dry-run|-n) dry=1 ;;
        -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install-deps: unknown argument: $a (use --test, --lab or --all)" >&2; exit 2 ;;
    esac
done

case $mode in
    test) want=("${TEST_PKGS[@]}") ;;
    lab)  want=("${LAB_PKGS[@]}") ;;
    all)  want=("${TEST_PKGS[@]}" "${LAB_PKGS[@]}") ;;
esac
# de-duplicate, keep order
declare -A seen=(); pkgs=()
for p in "${want[@]}"; do [ -n "${seen[$p]:-}" ] || { seen[$p]=1; pkgs+=("$p"); }; done

missing() {
    local p st
    for p in "${pkgs[@]}"; do
        st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
        case "$st" in ii*) ;; *) echo "$p" ;; esac
    done
}

mapfile -t miss < <(missing)
if [ ${#miss[@]} -eq 0 ]; then
    echo "install-deps: all ${#pkgs[@]} packages for --$mode are installed"
    exit 0
fi
echo "install-deps: missing for --$mode: ${miss[*]}"
if [ "$dry" = 1 ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: not root; nothing installed. Run as root:"
    echo "  sudo $0 --$mode"
    echo "or: sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${miss[*]}"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# tshark: do not ask whether non-root users may capture (wireshark-common debconf).
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections

# rpcbind / nfs-ganesha / nfs-kernel-server / haproxy must not start on the host: the
# tests start their own daemons (rpcbind in an empty netns, see
# /work/shared/nfspeers/peers.sh). Deny service starts during the install with a
# temporary policy-rc.d unless one already exists.
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# temporary, from rdmagw scripts/install-deps.sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt_get() { apt-get -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"; }
echo "install-deps: apt-get update"
apt_get update -q
apt_get install -y -q --no-install-recommends "${miss[@]}"

mapfile -t still < <(missing)
if [ ${#still[@]} -ne 0 ]; then
    echo "install-deps: still missing after install: ${still[*]}" >&2
    exit 1
fi
echo "install-deps: installed: ${miss[*]}"
