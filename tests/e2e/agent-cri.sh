#!/usr/bin/env bash
# A kubelet's pull through the node agent, as on a node: containerd's CRI plugin
# (ImageService.PullImage over gRPC, with the AuthConfig the kubelet passes:
# server_address empty, as kubelet sends it) and a hosts.toml naming the agent as
# the mirror of the image's registry, berth.example (a name no resolver knows, so
# containerd's fallback to the registry itself fails). containerd sends
# ?ns=berth.example; the replica holds the image as berth.example/alice/private.
# The replica has htpasswd users and rules (berth.example/alice/** for alice,
# everything for the agent's own user); the agent has that user's credentials
# and asks the replica with each caller's own (agent.authorize "caller").
#
# - alice's pull succeeds through the agent: the agent answered it, and the
#   replica saw blob GETs only from the agent, none from alice (containerd did
#   not go around the mirror);
# - with her image in the node's cache, anonymous and bob pulls fail (the agent
#   answers 401/403, and containerd's fallback to berth.example goes nowhere);
# - alice pulls again, the image removed from containerd: served from the node's
#   cache, the replica sees no new blob GET.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
need containerd ctr skopeo jq curl htpasswd
[[ -n ${BERTH_BIN:-} ]] || skip "agent-cri.sh needs berth (BERTH_BIN): it tests berth's node agent"
# Debian's python has the gRPC packages (a pyenv or venv python may not).
PYTHON=/usr/bin/python3
"$PYTHON" -c 'import grpc, grpc_tools' 2>/dev/null || skip "needs python3-grpcio and python3-grpc-tools"
CRI=("$PYTHON" "$(dirname "$0")/../lib/cri.py")

make_tmpdir WORK

log "replica: htpasswd users and per-user rules"
htpasswd -bBc "$WORK/htpasswd" alice alice-pw 2>/dev/null
htpasswd -bB "$WORK/htpasswd" bob bob-pw 2>/dev/null
htpasswd -bB "$WORK/htpasswd" node-agent agent-pw 2>/dev/null
jq -n --arg htpasswd "$WORK/htpasswd" '{log: {access: true}, auth: {htpasswd: $htpasswd, rules: [
    {repository: "berth.example/${user}/**", principals: ["authenticated"], actions: ["pull", "push"]},
    {repository: "**", principals: ["user:node-agent"], actions: ["pull"]}]}}' >"$WORK/replica.json"
BERTH_CONFIG=$WORK/replica.json start_registry
REPLICA=$REGISTRY REPLICA_LOG=$REGISTRY_LOG

want=$(oci_make_image "$WORK/src" v1)
skopeo copy -q --dest-tls-verify=false --dest-creds alice:alice-pw "oci:$WORK/src:v1" \
    "docker://$REPLICA/berth.example/alice/private:1"
log "alice pushed berth.example/alice/private:1 ($want) to the replica"

log "node agent in front of the replica, with its own user"
echo agent-pw >"$WORK/agent-password"
jq -n --arg replica "http://$REPLICA" --arg password "$WORK/agent-password" \
    '{log: {access: true}, agent: {replicas: [$replica], username: "node-agent", password_file: $password}}' \
    >"$WORK/agent.json"
BERTH_CONFIG=$WORK/agent.json start_registry
AGENT=$REGISTRY AGENT_LOG=$REGISTRY_LOG

mkdir -p "$WORK/hosts/berth.example"
cat >"$WORK/hosts/berth.example/hosts.toml" <<EOF
server = "http://berth.example"

[host."http://$AGENT"]
  capabilities = ["pull", "resolve"]
EOF
start_containerd_cri "$WORK/hosts"
IMAGE=berth.example/alice/private:1

cri_pull() { "${CRI[@]}" "$CONTAINERD_SOCK" pull "$IMAGE" --timeout 60 "$@"; }
forget() {
    "${CRI[@]}" "$CONTAINERD_SOCK" remove "$IMAGE" >/dev/null 2>&1 || true
    "${CTR[@]}" -n k8s.io content prune references >/dev/null 2>&1 || true
    [[ -z $("${CTR[@]}" -n k8s.io content ls -q 2>/dev/null | grep -F "$want") ]] ||
        fail "containerd still holds $want after removing the image"
}
# blob GETs the replica answered 200, by principal
replica_blob_gets() {
    jq -r --arg who "$1" 'select(.msg == "request" and .method == "GET" and .status == 200
        and (.target | test("/blobs/sha256:")) and .principal == $who) | .target' "$REPLICA_LOG" | wc -l
}

log "PullImage as alice (AuthConfig username/password, server_address empty, as kubelet sends)"
ref=$(cri_pull --username alice --password alice-pw) || fail "alice's pull through the agent failed"
log "pulled $ref"
agent_served=$(jq -r 'select(.msg == "request" and .status == 200 and (.target | test("^/v2/alice/private/(manifests|blobs)/.*[?&]ns=berth\\.example"))) | .target' \
    "$AGENT_LOG" | sort -u | wc -l)
((agent_served >= 4)) || { grep '"request"' "$AGENT_LOG" >&2; fail "the agent answered $agent_served manifest/blob requests with 200 (want >= 4)"; }
assert_eq 0 "$(replica_blob_gets alice)" "blob GETs alice made at the replica herself"
# The replica logs a GET once it has sent all of it, maybe after containerd has the bytes.
agent_fetched_all() { (($(replica_blob_gets node-agent) >= 3)); }
wait_until 10 agent_fetched_all ||
    fail "the replica answered the agent $(replica_blob_gets node-agent) blob GETs (want 3: config and 2 layers)"
from_agent=$(replica_blob_gets node-agent)
log "ok: the agent served alice; the replica saw $from_agent blob GETs from the agent, none from alice"

forget
log "with alice's image in the node's cache: anonymous and bob"
if cri_pull 2>"$WORK/anonymous.err"; then fail "an anonymous pull of alice's private image succeeded"; fi
if cri_pull --username bob --password bob-pw 2>"$WORK/bob.err"; then fail "bob pulled alice's private image"; fi
refusals=$(jq -r 'select(.msg == "request" and (.status == 401 or .status == 403) and (.target | test("^/v2/alice/private/.*ns=berth"))) | .status' \
    "$AGENT_LOG" | sort -u | tr '\n' ' ')
[[ $refusals == *401* && $refusals == *403* ]] || fail "the agent's refusals were '$refusals' (want 401 and 403)"
log "ok: refused ($(tail -n 1 "$WORK/bob.err" | cut -c1-160))"

log "alice again, the image gone from containerd: from the node's cache"
ref=$(cri_pull --username alice --password alice-pw) || fail "alice's second pull failed"
assert_eq "$from_agent" "$(replica_blob_gets node-agent)" "blob GETs the agent made at the replica after the second pull"
assert_eq 0 "$(replica_blob_gets alice)" "blob GETs alice made at the replica herself"
log "ok: served from the node's cache"
