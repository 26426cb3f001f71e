#!/bin/sh
# /init of the busybox initramfs (made by build-guest.sh). PID 1 in the guest.
#  - loads virtio_pci, 9p and overlay (list and order from build-guest.sh)
#  - mounts the host's / (virtio-9p tag "hostroot", read-only) as the lower
#    layer of an overlay with a tmpfs upper => a writable root that looks
#    like the host
#  - mounts the writable results share (tag "e2e_out") at /e2e-out
#  - switch_root to e2evm.init= (guest-init.sh, a HOST bash script)
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fail() { echo "INITRAMFS: $*"; echo "RDMAVM_RC=126"; echo o > /proc/sysrq-trigger; sleep 5; }

for m in $(cat /mods/order); do
    insmod "/mods/$m" || echo "INITRAMFS: insmod $m failed"
done

INIT=
for a in $(cat /proc/cmdline); do
    case "$a" in e2evm.init=*) INIT=${a#e2evm.init=} ;; esac
done
[ -n "$INIT" ] || fail "no e2evm.init= on the kernel command line"

# cache=loose: the host root is shared read-only and not changed during a
# run -> let the guest page-cache it (a big win for exec'ing binaries).
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostroot /mnt/lower \
    || fail "mount of 9p hostroot failed"
mount -t tmpfs -o mode=755 tmpfs /mnt/rw
mkdir -p /mnt/rw/upper /mnt/rw/work
mount -t overlay overlay \
    -o lowerdir=/mnt/lower,upperdir=/mnt/rw/upper,workdir=/mnt/rw/work,index=off,xino=off,redirect_dir=off,metacopy=off \
    /newroot || fail "overlay mount failed"

mkdir -p /newroot/e2e-out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 e2e_out /newroot/e2e-out \
    || echo "INITRAMFS: no e2e_out share"

for d in proc sys dev; do mount --move /$d /newroot/$d; done
exec switch_root /newroot /bin/bash "$INIT"
