#!/bin/sh
# init (PID 1) of the user-mode Linux that tests/kernel/kernel_tls.sh boots: the host's root is this
# kernel's root (hostfs), so the tests run the host's build and tools under a kernel that has TLS.
# The kernel passes its command line's NAME=value words here as the environment: UML_MODULES (the
# kernel's module tree), UML_OUT (a host folder for the result), UML_TEST, BERTH_BIN.
set -u
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs tmp "$UML_OUT/tmp"
ip link set lo up
# The kernel's TLS and the AES-GCM it asks the crypto API for; no modprobe: the modules are not in
# the host's /lib/modules.
for module in crypto/gf128mul crypto/ghash-generic crypto/ctr crypto/seqiv crypto/gcm net/tls/tls; do
    insmod "$UML_MODULES/kernel/$module.ko" || echo "cannot load $module" >&2
done
cat /proc/sys/net/ipv4/tcp_available_ulp >"$UML_OUT/ulps"
ulimit -n 65536
export TMPDIR="$UML_OUT/tmp" HOME="$UML_OUT/tmp" PATH=/usr/sbin:/usr/bin:/sbin:/bin
python3 "$UML_TEST" -v >"$UML_OUT/tests.log" 2>&1
echo $? >"$UML_OUT/rc"
poweroff -f
