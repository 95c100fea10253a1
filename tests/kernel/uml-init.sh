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
load() {
    for module in "$@"; do
        insmod "$UML_MODULES/kernel/$module.ko" || echo "cannot load $module" >&2
    done
}
# what berth's startup log says (its TLS line) under the kernel as it is now
tls_line() {
    dir=$(mktemp -d)
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/key.pem" -out "$dir/cert.pem" \
        -days 1 -subj /CN=uml 2>/dev/null
    echo "{\"tls\":{\"cert\":\"$dir/cert.pem\",\"key\":\"$dir/key.pem\"}}" >"$dir/berth.json"
    "$BERTH_BIN" serve --config "$dir/berth.json" --listen 127.0.0.1:0 --root "$dir/root" 2>"$dir/log" &
    for _ in $(seq 100); do
        grep -q '"msg":"TLS"' "$dir/log" && break
        sleep 0.1
    done
    kill $! 2>/dev/null
    wait $! 2>/dev/null
    grep '"msg":"TLS"' "$dir/log"
}
ulimit -n 65536
export TMPDIR="$UML_OUT/tmp" HOME="$UML_OUT/tmp" PATH=/usr/sbin:/usr/bin:/sbin:/bin
# The kernel's TLS and the AES-GCM it asks the crypto API for; no modprobe: the modules are not in
# the host's /lib/modules. First the tls module alone: it then refuses every key, and berth must say so.
load crypto/gf128mul crypto/ghash-generic crypto/ctr crypto/seqiv net/tls/tls
tls_line >"$UML_OUT/without-gcm"
load crypto/gcm
cat /proc/sys/net/ipv4/tcp_available_ulp >"$UML_OUT/ulps"
python3 "$UML_TEST" -v >"$UML_OUT/tests.log" 2>&1
echo $? >"$UML_OUT/rc"
poweroff -f
