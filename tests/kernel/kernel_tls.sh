#!/usr/bin/env bash
# The TLS tests again under a kernel that encrypts TLS (kTLS), where berth hands the kernel its send
# keys and blobs go out with sendfile: most hosts here run a kernel without CONFIG_TLS, so without
# this the kernel's path would never run. The kernel is Debian's user-mode Linux (package
# user-mode-linux): a Linux kernel run as an ordinary process, with CONFIG_TLS=m, that needs no
# virtualisation. It boots with the host's root as its own and runs tests/integration/test_tls.py
# against the host's build; the test fails if the kernel did not take TLS or a kernel test was skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${BERTH_BIN:-$here/../../build/berth}
kernel=$(command -v linux.uml) || { echo "linux.uml missing: .ci/install-deps test installs user-mode-linux" >&2; exit 1; }
modules=$(ls -d /usr/lib/uml/modules/*/ | head -n1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir "$out/tmp"
# The kernel's memory is a file under TMPDIR; with none left it would fail in obscure ways. Its own
# deadline comes well before ctest's (600 s), so that a hung kernel is reported with its console.
TMPDIR=$out timeout 420 "$kernel" mem=1G rootfstype=hostfs rootflags=/ rw con=null con0=null,fd:1 \
    init="$here/uml-init.sh" UML_MODULES="${modules%/}" UML_OUT="$out" UML_TEST="$here/../integration/test_tls.py" \
    BERTH_BIN="$(realpath "$bin")" </dev/null >"$out/console.log" 2>&1 || true
cat "$out/tests.log" 2>/dev/null || { echo "the kernel did not run the tests:"; tail -n 40 "$out/console.log"; exit 1; }
[ -s "$out/rc" ] || { echo "the kernel did not finish the tests (its deadline passed):"; tail -n 40 "$out/console.log"; exit 1; }
grep -qw tls "$out/ulps" || { echo "the kernel did not take its tls module (ULPs: $(cat "$out/ulps"))"; exit 1; }
echo "with the tls module but no gcm, berth's TLS line and a GET's status: $(cat "$out/without-gcm")"
grep -q "has no AES-GCM" "$out/without-gcm" ||
    { echo "with the tls module but no gcm, berth's log did not say the kernel cannot encrypt"; exit 1; }
[ "$(tail -n1 "$out/without-gcm")" = 200 ] || { echo "with the tls module but no gcm, a TLS GET did not get 200"; exit 1; }
for test in test_kernel_tls_sends_blobs_with_sendfile test_key_update_from_the_client test_metrics_and_log_say_who_encrypts \
            test_berth_seals_tls13_records; do
    grep -q "^$test .* \.\.\. ok$" "$out/tests.log" || { echo "$test did not pass under the kernel's TLS"; exit 1; }
done
exit "$(cat "$out/rc")"
