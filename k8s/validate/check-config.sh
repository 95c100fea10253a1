#!/usr/bin/env bash
# Starts berth with each configuration the Kubernetes example ships, to prove
# berth accepts it (its config check is strict: an unknown key or a wrong type
# stops the start):
#   - k8s/configmap.yaml: the base; the backup CronJob's command must then get
#     a backup;
#   - k8s/bucket/configmap.yaml: blobs in a bucket. Its config must be the
#     base's with "backup" removed and "storage" added, nothing else, so the
#     two cannot drift apart. The bucket's endpoint becomes a loopback port
#     nothing listens on (a bucket that is down), which must not keep berth
#     from serving /healthz.
# Only the secret paths are changed, to a throwaway secret, and the data and
# backups go to a temporary directory. berth serves on a free loopback port
# until /healthz answers, then gets SIGTERM and must exit 0.
#   bash k8s/validate/check-config.sh [BERTH_BINARY]   (default build/berth)
# Needs node_modules here (bash k8s/validate/run.sh installs it), curl and python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
berth="${1:-$repo/build/berth}"
[ -x "$berth" ] || { echo "check-config: no berth binary at $berth (build it first)" >&2; exit 2; }
[ -d "$here/node_modules" ] || (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)

work="$(mktemp -d)"
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/peer-secret"
# a port outside the ephemeral range, as the integration tests pick theirs
free_port() { PYTHONPATH="$repo/tests/lib" python3 -c 'import berthtest; print(berthtest.free_port())'; }

fail() {
    echo "FAIL: $1" >&2
    cat "${@:2}" >&2
    exit 1
}

# check CONFIGMAP [S3_ENDPOINT]: berth serves with CONFIGMAP's config.json (a
# path under k8s/), takes a backup on request if the config has a backup
# section, and exits 0 on SIGTERM.
check() {
    local name="k8s/$1" endpoint="${2:-}" dir
    dir="$work/$(dirname "$1")"
    mkdir -p "$dir"
    node "$here/extract-config.mjs" "$repo/$name" "$work/peer-secret" $endpoint > "$dir/config.json"
    local port
    port="$(free_port)"
    "$berth" serve --config "$dir/config.json" --listen "127.0.0.1:$port" --root "$dir/data" \
        > "$dir/berth.log" 2>&1 &
    pid=$!

    local healthy=""
    for _ in $(seq 1 100); do
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; then healthy=yes; break; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$healthy" ] || fail "berth did not serve /healthz with $name's configuration:" "$dir/berth.log"
    local readyz backup=""
    readyz="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)"
    # The backup CronJob's command against this configuration: a backup lands in backup.target.
    if python3 -c 'import json, sys; sys.exit("backup" not in json.load(open(sys.argv[1])))' "$dir/config.json"; then
        if ! "$berth" backup --url "http://127.0.0.1:$port" --secret-file "$work/peer-secret" > "$dir/backup.json" 2>&1 ||
            [ -z "$(ls "$work/backups/backups" 2>/dev/null)" ]; then
            fail "berth backup --url with $name's backup section:" "$dir/backup.json" "$dir/berth.log"
        fi
        backup=", a backup on request"
    fi

    kill -TERM "$pid"
    local status=0
    wait "$pid" || status=$?
    pid=""
    [ "$status" -eq 0 ] || fail "berth exited $status on SIGTERM with $name's configuration:" "$dir/berth.log"
    echo "ok: berth accepted $name's configuration (/healthz 200, /readyz $readyz$backup, exit 0 on SIGTERM)"
}

check configmap.yaml

# The bucket's config is the base's with backup removed and storage added, nothing else.
node "$here/extract-config.mjs" "$repo/k8s/configmap.yaml" > "$work/base.json"
node "$here/extract-config.mjs" "$repo/k8s/bucket/configmap.yaml" > "$work/bucket.json"
python3 - "$work/base.json" "$work/bucket.json" <<'END'
import json, sys
base, bucket = (json.load(open(path)) for path in sys.argv[1:])
base.pop("backup", None)
bucket.pop("storage", None)
for key in sorted(set(base) | set(bucket)):
    if base.get(key) != bucket.get(key):
        sys.exit(f'FAIL: k8s/bucket/configmap.yaml: "{key}" differs from k8s/configmap.yaml '
                 '(they may differ in "backup" and "storage" only)')
END
check bucket/configmap.yaml "http://127.0.0.1:$(free_port)"
