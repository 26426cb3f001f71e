#!/bin/bash
# build-guest.sh - prepare what run-guest.sh boots (idempotent, 0.1 s when done).
#
#   e2e/vm/build-guest.sh
#
#   1. the host packages of the lab (scripts/install-deps.sh --lab)
#   2. the guest kernel: Debian's linux-image-$KVER .deb, fetched with
#      `apt-get download` (KVER defaults to what linux-image-amd64 depends
#      on), unpacked, module tree depmod'ed, under $E2E_CACHE/kernel
#   3. siw.ko (soft-iWARP, which Debian's kernels do not build): the siw
#      directory of linux-source-<major.minor>, built out of tree against
#      linux-headers-$KVER (+ its -common and linux-kbuild .debs, all of
#      the kernel's own version, `apt-get download`), installed as
#      lib/modules/$KVER/updates/siw.ko in the cached module tree. A failure
#      here only warns: the siw cases then report the lab failure.
#   4. a static busybox from busybox-static (`apt-get download`)
#   5. $E2E_CACHE/initramfs-$KVER.cpio.gz: busybox + the modules that mount
#      the host's / over virtio-9p (virtio_pci, 9pnet_virtio, 9p, overlay)
#      + /init (guest/initramfs-init.sh): overlay root = host / read-only
#      (9p) + tmpfs, then switch_root into guest/guest-init.sh.
#
# The guest then runs the HOST's binaries (rdma-core, nfs-utils, fio, the
# host-built gateway) on the GUEST's Debian kernel (rdma_rxe, rpcrdma,
# nfsd, nfs). Nothing comes from anywhere but Debian's packages.
#
# Environment:
#   E2E_CACHE   where kernel, busybox and initramfs go
#               (default /var/tmp/rdmagw-e2e; several KVERs coexist)
#   KVER        a Debian kernel release, e.g. 6.1.0-56-amd64 or
#               6.12.117+deb12-amd64 (default: linux-image-amd64's dependency)
#   E2E_NO_SIW  1: do not build siw.ko (the siw cases then fail as lab failures)
#   E2E_DEB_DIR a directory that may already hold linux-image-$KVER_*.deb /
#               busybox-static_*.deb (skips the download; optional)
set -euo pipefail
shopt -s nullglob

VM=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$VM/../.." && pwd)
E2E_CACHE=${E2E_CACHE:-/var/tmp/rdmagw-e2e}
t0=$(date +%s.%N)

"$REPO/scripts/install-deps.sh" --lab >&2

kver_default() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/{sub("linux-image-","",$2); print $2; exit}' || true
}
KVER=${KVER:-$(kver_default)}
if [ -z "$KVER" ] && [ "$(id -u)" = 0 ]; then
    echo "[build] apt-cache knows no linux-image-amd64: apt-get update" >&2
    apt-get update -q >&2 || true
    KVER=$(kver_default)
fi
[ -n "$KVER" ] || { echo "[build] cannot find the kernel version (set KVER, or run apt-get update)" >&2; exit 2; }

KDIR=$E2E_CACHE/kernel        # boot/vmlinuz-$KVER, lib/modules/$KVER
DEBS=$E2E_CACHE/debs
mkdir -p "$KDIR" "$DEBS"

# first_file GLOB...: print the first existing file (no ls|head: with
# pipefail a glob that matches nothing must not end the script silently)
first_file() { local f; for f in "$@"; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 0; }

# fetch_deb PKG [VERSION]: path of PKG's .deb (of that version, if given),
# downloaded with apt-get download if needed
fetch_deb() {
    local pkg=$1 ver=${2:-} deb want
    want=${ver:+"${ver//:/%3a}"}; want=${want:-*}
    deb=$(first_file "$DEBS/${pkg}"_${want}_*.deb ${E2E_DEB_DIR:+"$E2E_DEB_DIR/${pkg}"_${want}_*.deb} /var/cache/apt/archives/"${pkg}"_${want}_*.deb)
    if [ -z "$deb" ]; then
        echo "[build] apt-get download $pkg${ver:+=$ver}" >&2
        (cd "$DEBS" && apt-get download -q -o APT::Sandbox::User=root "$pkg${ver:+=$ver}" >&2) ||
            { [ "$(id -u)" = 0 ] && apt-get update -q >&2 && (cd "$DEBS" && apt-get download -q -o APT::Sandbox::User=root "$pkg${ver:+=$ver}" >&2); } ||
            { echo "[build] apt-get download $pkg${ver:+=$ver} failed" >&2; return 1; }
        deb=$(first_file "$DEBS/${pkg}"_${want}_*.deb)
    fi
    [ -n "$deb" ] || { echo "[build] no .deb for $pkg" >&2; return 1; }
    echo "$deb"
}

# ---------------------------------------------------------------- kernel ----
if [ ! -f "$KDIR/boot/vmlinuz-$KVER" ] || [ ! -d "$KDIR/lib/modules/$KVER/kernel" ]; then
    deb=$(fetch_deb "linux-image-$KVER")
    tmp=$(mktemp -d "$E2E_CACHE/.kroot.XXXXXX")
    echo "[build] unpacking $(basename "$deb")" >&2
    dpkg-deb -x "$deb" "$tmp"
    mkdir -p "$KDIR/boot" "$KDIR/lib/modules"
    cp -a "$tmp/boot/"*"$KVER"* "$KDIR/boot/"
    rm -rf "$KDIR/lib/modules/$KVER"
    mv "$tmp/lib/modules/$KVER" "$KDIR/lib/modules/$KVER"
    rm -rf "$tmp"
    rm -f "$KDIR/lib/modules/$KVER/modules.dep"
fi
if [ ! -s "$KDIR/lib/modules/$KVER/modules.dep" ]; then
    echo "[build] depmod $KVER" >&2
    depmod -b "$KDIR" "$KVER"
fi

# ------------------------------------------------------------------- siw ----
# build_siw: siw.ko for $KVER from Debian's own source and headers, of the
# kernel's exact package version. The headers' Makefile includes the
# -common tree by absolute /usr/src path: the unpacked copy is pointed at
# its own -common tree instead, so nothing is installed on the host.
SIW_KO=$KDIR/lib/modules/$KVER/updates/siw.ko
# archive_version PKG VER: VER when the archive (or the download cache)
# has PKG at it; else, for the packages every kernel ABI of one upstream
# release shares (linux-kbuild-*, linux-compiler-*: host tools and the
# compiler's name), the archive's newest PKG of VER's upstream version
# (bookworm-security moved linux-kbuild-6.1 from 6.1.192-2 to -3 while
# the 6.1.192-2 kernel and headers stayed); else VER (the download then
# fails and says so)
archive_version() {
    local pkg=$1 ver=$2 alt
    if [ -n "$(first_file "$DEBS/${pkg}_${ver//:/%3a}"_*.deb)" ] ||
        apt-cache madison "$pkg" 2>/dev/null | awk -F'|' -v v="$ver" '{gsub(/ /, "", $2)} $2 == v {f = 1} END {exit !f}'; then
        echo "$ver"; return 0
    fi
    case $pkg in
    linux-kbuild-*|linux-compiler-*)
        alt=$(apt-cache madison "$pkg" 2>/dev/null |
            awk -F'|' -v u="${ver%-*}-" '{gsub(/ /, "", $2)} index($2, u) == 1 {print $2; exit}')
        if [ -n "$alt" ]; then
            echo "[build] siw: $pkg $ver is not in the archive; $alt (the same upstream release)" >&2
            echo "$alt"; return 0
        fi ;;
    esac
    echo "$ver"
}
build_siw() {
    local kdeb kpkgver mm hdeps tmp d src hdr
    kdeb=$(first_file "$DEBS/linux-image-$KVER"_*.deb ${E2E_DEB_DIR:+"$E2E_DEB_DIR/linux-image-$KVER"_*.deb})
    if [ -n "$kdeb" ]; then kpkgver=$(dpkg-deb -f "$kdeb" Version)
    else kpkgver=$(apt-cache show --no-all-versions "linux-image-$KVER" 2>/dev/null | awk '/^Version:/{print $2; exit}'); fi
    [ -n "$kpkgver" ] || { echo "[build] siw: no package version for linux-image-$KVER" >&2; return 1; }
    mm=$(echo "$KVER" | cut -d. -f1-2)    # 6.1.0-56-amd64 -> 6.1
    hdeps=$(apt-cache depends "linux-headers-$KVER" 2>/dev/null |
        awk '/Depends: linux-(headers|kbuild)-/{print $2}')
    tmp=$(mktemp -d "$E2E_CACHE/.siw.XXXXXX")
    for d in "linux-headers-$KVER" $hdeps; do
        d=$(fetch_deb "$d" "$(archive_version "$d" "$kpkgver")") || { rm -rf "$tmp"; return 1; }
        dpkg-deb -x "$d" "$tmp/root"
    done
    d=$(fetch_deb "linux-source-$mm" "$kpkgver") || { rm -rf "$tmp"; return 1; }
    echo "[build] siw: unpacking drivers/infiniband/sw/siw from $(basename "$d")" >&2
    dpkg-deb --fsys-tarfile "$d" | tar -xO "./usr/src/linux-source-$mm.tar.xz" |
        tar -xJ -C "$tmp" "linux-source-$mm/drivers/infiniband/sw/siw" || { rm -rf "$tmp"; return 1; }
    src=$tmp/linux-source-$mm/drivers/infiniband/sw/siw
    hdr=$tmp/root/usr/src/linux-headers-$KVER
    sed -i "s|include /usr/src/|include $tmp/root/usr/src/|" "$hdr/Makefile"
    echo "[build] siw: make M=... CONFIG_RDMA_SIW=m modules ($KVER, $kpkgver)" >&2
    if ! make -s -C "$hdr" M="$src" CONFIG_RDMA_SIW=m -j"$(nproc)" modules > "$tmp/make.log" 2>&1; then
        tail -20 "$tmp/make.log" >&2; rm -rf "$tmp"; return 1
    fi
    mkdir -p "$(dirname "$SIW_KO")"
    cp "$src/siw.ko" "$SIW_KO.tmp" && mv "$SIW_KO.tmp" "$SIW_KO"
    rm -rf "$tmp"
    echo "[build] depmod $KVER (+ updates/siw.ko)" >&2
    depmod -b "$KDIR" "$KVER"    # (atomic: a running guest never sees no modules.dep)
}
if [ ! -f "$SIW_KO" ] && [ "${E2E_NO_SIW:-0}" != 1 ]; then
    build_siw || echo "[build] WARNING: building siw.ko failed; the siw cases will report a lab failure" >&2
fi

# --------------------------------------------------------------- busybox ----
BB=$E2E_CACHE/busybox
if [ ! -x "$BB" ]; then
    deb=$(fetch_deb busybox-static)
    tmp=$(mktemp -d "$E2E_CACHE/.bb.XXXXXX")
    dpkg-deb -x "$deb" "$tmp"
    cp "$tmp/bin/busybox" "$BB.tmp" && mv "$BB.tmp" "$BB"
    rm -rf "$tmp"
fi

# ------------------------------------------------------------- initramfs ----
INITRD=$E2E_CACHE/initramfs-$KVER.cpio.gz
if [ ! -s "$INITRD" ] || [ "$VM/guest/initramfs-init.sh" -nt "$INITRD" ] || [ "$0" -nt "$INITRD" ]; then
    IR=$(mktemp -d "$E2E_CACHE/.initramfs.XXXXXX")
    trap 'rm -rf "$IR"' EXIT
    mkdir -p "$IR"/{bin,dev,proc,sys,mnt/lower,mnt/rw,newroot,mods}
    cp "$BB" "$IR/bin/busybox"
    ln -s busybox "$IR/bin/sh"
    : > "$IR/mods/order"
    for m in virtio_pci 9pnet_virtio 9p overlay; do
        modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" | awk '$1=="insmod"{print $2}'
    done | awk '!seen[$0]++' > "$IR/mods/list"
    while read -r ko; do
        b=$(basename "$ko")
        case $b in   # busybox insmod wants plain .ko (Debian >= 6.6 ships .ko.xz)
            *.ko.xz)  xz -dc "$ko" > "$IR/mods/${b%.xz}"; b=${b%.xz} ;;
            *.ko.zst) zstd -qdc "$ko" > "$IR/mods/${b%.zst}"; b=${b%.zst} ;;
            *.ko.gz)  gzip -dc "$ko" > "$IR/mods/${b%.gz}"; b=${b%.gz} ;;
            *)        cp "$ko" "$IR/mods/" ;;
        esac
        echo "$b" >> "$IR/mods/order"
    done < "$IR/mods/list"
    rm -f "$IR/mods/list"
    [ -s "$IR/mods/order" ] || { echo "[build] no 9p/overlay modules found for $KVER" >&2; exit 2; }
    echo "[build] initramfs modules: $(tr '\n' ' ' < "$IR/mods/order")" >&2
    cp "$VM/guest/initramfs-init.sh" "$IR/init"
    chmod 755 "$IR/init"
    (cd "$IR" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp"
    mv "$INITRD.tmp" "$INITRD"
fi

# ------------------------------------------------- host userland check ----
missing=""
for b in qemu-system-x86_64 modprobe rdma ibv_devices rpc.nfsd exportfs rpcbind \
         rpc.mountd nfsdcld mount.nfs ip sha256sum; do
    command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
done
[ -z "$missing" ] || { echo "[build] missing host binaries:$missing" >&2; exit 2; }

printf '[build] ready in %.1fs: kernel %s, %s\n' \
    "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$KVER" "$INITRD" >&2
