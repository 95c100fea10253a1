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
#     from serving /healthz;
#   - k8s/node/configmap.yaml: the node agent's, read by `berth agent-runtime
#     apply` as its init container does, on a made-up node (containerd,
#     CRI-O, k3s under a temporary directory); the files it writes must pass
#     validate.mjs's runtime file checks.
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

# The agent's ConfigMap (k8s/node/): berth reads it strictly (agent-runtime loads it as the agent
# does), and the runtime files its init container writes on a made-up node with containerd (its
# config_path set), CRI-O and k3s are valid for those runtimes and point at the agent.
node "$here/extract-config.mjs" "$repo/k8s/node/configmap.yaml" > "$work/agent-raw.json"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=berth-agent \
    -keyout "$work/agent.key" -out "$work/agent.crt" 2>/dev/null
python3 - "$work" <<'END'
import json, sys
work = sys.argv[1]
config = json.load(open(f"{work}/agent-raw.json"))
agent = config["agent"]
agent["ca_file"], agent["cert_file"], agent["key_file"] = f"{work}/agent.crt", f"{work}/agent.crt", f"{work}/agent.key"
config["root"] = f"{work}/agent-root"
json.dump(config, open(f"{work}/agent.json", "w"))
END
node_root="$work/node"
mkdir -p "$node_root/etc/containerd" "$node_root/etc/containers/registries.conf.d" "$node_root/etc/rancher/k3s"
printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/etc/containerd/certs.d"\n' \
    > "$node_root/etc/containerd/config.toml"
"$berth" agent-runtime apply --config "$work/agent.json" --host-root "$node_root" > "$work/apply.out" 2>&1 ||
    fail "berth agent-runtime apply with k8s/node/configmap.yaml:" "$work/apply.out"
grep -q '^containerd set ' "$work/apply.out" || fail "agent-runtime apply did not find config_path set:" "$work/apply.out"
"$berth" agent-runtime check --config "$work/agent.json" --host-root "$node_root" > "$work/check.out" 2>&1 ||
    fail "agent-runtime check after apply:" "$work/check.out"
# validate.mjs checks the files against the agent's ConfigMap beside them.
mkdir -p "$work/runtime"
cp "$repo/k8s/node/configmap.yaml" "$repo/k8s/node/service-replicas.yaml" "$work/runtime/"
cp -r "$node_root/etc/containerd" "$node_root/etc/containers" "$work/runtime/"
grep -qxF '      - "http://127.0.0.1:5050"' "$node_root/etc/rancher/k3s/registries.yaml" ||
    fail "k3s's registries.yaml does not name the agent:" "$node_root/etc/rancher/k3s/registries.yaml"
node "$here/validate.mjs" "$work/runtime" > "$work/validate.out" 2>&1 ||
    fail "the runtime files agent-runtime apply writes:" "$work/validate.out"
grep -q ' 6 runtime file' "$work/validate.out" ||
    fail "expected 6 runtime files (4 registries and _default, one CRI-O drop-in) to be validated:" "$work/validate.out"
echo "ok: k8s/node/configmap.yaml's agent writes valid runtime files ($(grep -c '^written' "$work/apply.out") written)"
