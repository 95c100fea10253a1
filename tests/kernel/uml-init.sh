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
# berth started under the kernel as it is now: its TLS line, then the status of a TLS 1.3 GET of /v2/
tls_line_and_get() {
    dir=$(mktemp -d)
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/key.pem" -out "$dir/cert.pem" \
        -days 1 -subj /CN=uml 2>/dev/null
    echo "{\"tls\":{\"cert\":\"$dir/cert.pem\",\"key\":\"$dir/key.pem\"}}" >"$dir/berth.json"
    "$BERTH_BIN" serve --config "$dir/berth.json" --listen 127.0.0.1:0 --root "$dir/root" 2>"$dir/log" &
    pid=$!
    port=
    for _ in $(seq 200); do
        port=$(grep '"msg":"listening"' "$dir/log" | grep -o '"port":[0-9]*' | cut -d: -f2)
        [ -n "$port" ] && break
        sleep 0.1
    done
    grep '"msg":"TLS"' "$dir/log"
    curl -sk --tlsv1.3 --max-time 20 -o /dev/null -w '%{http_code}\n' "https://127.0.0.1:$port/v2/"
    kill "$pid" 2>/dev/null
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}
ulimit -n 65536
export TMPDIR="$UML_OUT/tmp" HOME="$UML_OUT/tmp" PATH=/usr/sbin:/usr/bin:/sbin:/bin
# The kernel's TLS and the AES-GCM it asks the crypto API for; no modprobe: the modules are not in
# the host's /lib/modules. First the tls module alone: it then refuses every AES-GCM key, and berth must say
# so and serve TLS all the same.
load crypto/gf128mul crypto/ghash-generic crypto/ctr crypto/seqiv net/tls/tls
tls_line_and_get >"$UML_OUT/without-gcm"
load crypto/gcm
cat /proc/sys/net/ipv4/tcp_available_ulp >"$UML_OUT/ulps"
python3 "$UML_TEST" -v >"$UML_OUT/tests.log" 2>&1
echo $? >"$UML_OUT/rc"
poweroff -f
