#!/usr/bin/env bash
# The node agent points containerd at itself (`berth agent-runtime`, the DaemonSet's init
# container), on a node laid out under a folder (--host-root, as the DaemonSet mounts the node's
# /etc under /host):
#
# - apply writes certs.d/_default and certs.d/berth.example hosts.toml, each with the marker line
#   and the registry itself as the next host; a hand-written certs.d/hand.example/hosts.toml, a
#   registry the agent is also told to mirror, is left alone ("kept"), byte for byte;
# - containerd's CRI (driven over gRPC as the kubelet does), with config_path on that certs.d,
#   pulls berth.example/team/app:1 through the agent: the agent's log has the ?ns= requests;
# - apply again changes nothing ("unchanged"); taking a registry off the list removes its file;
# - the agent reports config_path: "set" in its metrics; a node whose config.toml sets no
#   config_path is reported "unset" by check (exit 1), in the agent's log and its metrics;
# - k3s's registries.yaml is written where /etc/rancher/k3s exists, RKE2's not (no /etc/rancher/rke2);
# - remove deletes exactly the files apply wrote: the hand-written one stays.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
need containerd ctr skopeo jq curl
[[ -n ${BERTH_BIN:-} ]] || skip "agent-runtime.sh needs berth (BERTH_BIN): it tests berth's node agent"
PYTHON=/usr/bin/python3
"$PYTHON" -c 'import grpc, grpc_tools' 2>/dev/null || skip "needs python3-grpcio and python3-grpc-tools"
CRI=("$PYTHON" "$(dirname "$0")/../lib/cri.py")

make_tmpdir WORK
HOST=$WORK/host                                  # the node's / as the init container sees it
CERTS=$HOST/etc/containerd/certs.d
mkdir -p "$CERTS/hand.example" "$HOST/etc/containerd" "$HOST/etc/rancher/k3s"
printf 'server = "https://hand.example"\n# mine\n' >"$CERTS/hand.example/hosts.toml"
hand_sum=$(sha256sum <"$CERTS/hand.example/hosts.toml")
# The node's containerd configuration, as the check reads it (names in the node's terms).
node_config() {
    printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\n  %s\n' "$1" \
        >"$HOST/etc/containerd/config.toml"
}
node_config 'config_path = "/etc/containerd/certs.d"'

BERTH_CONFIG= start_registry
REPLICA=$REGISTRY
want=$(oci_make_image "$WORK/src" v1)
skopeo copy -q --dest-tls-verify=false "oci:$WORK/src:v1" "docker://$REPLICA/berth.example/team/app:1"

agent_config() {
    jq -n --arg replica "http://$REPLICA" --argjson registries "$1" '{log: {access: true},
        agent: {replicas: [$replica], authorize: "agent", runtime: {registries: $registries,
            crio_dir: "", registries_yaml: ["/etc/rancher/k3s/registries.yaml", "/etc/rancher/rke2/registries.yaml"]}}}' \
        >"$WORK/agent.json"
}
agent_config '["berth.example", "other.example", "hand.example"]'
BERTH_CONFIG=$WORK/agent.json start_registry
AGENT=$REGISTRY AGENT_LOG=$REGISTRY_LOG
# The listen address start_registry chose is what the files must name.
jq --arg listen "$AGENT" '.listen = $listen' "$WORK/agent.json" >"$WORK/agent.listen.json"
runtime() { "$BERTH_BIN" agent-runtime "$1" --config "$WORK/agent.listen.json" --host-root "$HOST"; }

log "apply"
out=$(runtime apply)
echo "$out"
grep -qx "written $CERTS/_default/hosts.toml" <<<"$out" || fail "_default not written"
grep -qx "written $CERTS/berth.example/hosts.toml" <<<"$out" || fail "berth.example not written"
grep -qx "containerd set config_path names /etc/containerd/certs.d" <<<"$out" || fail "config_path not reported set"
grep -qx "kept $CERTS/hand.example/hosts.toml" <<<"$out" || fail "the hand-written hosts.toml not reported kept"
grep -qx "written $HOST/etc/rancher/k3s/registries.yaml" <<<"$out" || fail "k3s registries.yaml not written"
! grep -q "rke2" <<<"$out" || fail "registries.yaml written for RKE2, which this node does not have"
grep -qF "      - \"http://$AGENT\"" "$HOST/etc/rancher/k3s/registries.yaml" || fail "registries.yaml does not name the agent"
head -n 1 "$CERTS/berth.example/hosts.toml" | grep -q '^# berth-agent-managed:' || fail "no marker line"
grep -qx 'server = "https://berth.example"' "$CERTS/berth.example/hosts.toml" || fail "the registry is not the next host"
grep -qF "[host.\"http://$AGENT\"]" "$CERTS/_default/hosts.toml" || fail "_default does not name the agent"
! grep -q '^server' "$CERTS/_default/hosts.toml" || fail "_default names a server"
assert_eq "$hand_sum" "$(sha256sum <"$CERTS/hand.example/hosts.toml")" "the hand-written hosts.toml"

log "containerd's CRI pulls through the agent"
start_containerd_cri "$CERTS"
ref=$("${CRI[@]}" "$CONTAINERD_SOCK" pull berth.example/team/app:1 --timeout 60) || fail "the CRI pull failed"
log "pulled $ref"
served=$(jq -r 'select(.msg == "request" and .status == 200 and (.target | test("^/v2/team/app/(manifests|blobs)/.*[?&]ns=berth\\.example"))) | .target' \
    "$AGENT_LOG" | sort -u | wc -l)
((served >= 4)) || fail "the agent answered $served manifest/blob requests (want >= 4)"

log "apply again: unchanged; a registry taken off the list: its file removed"
out=$(runtime apply)
grep -qx "unchanged $CERTS/berth.example/hosts.toml" <<<"$out" || fail "second apply rewrote berth.example: $out"
agent_config '["berth.example"]'
jq --arg listen "$AGENT" '.listen = $listen' "$WORK/agent.json" >"$WORK/agent.listen.json"
out=$(runtime apply)
grep -qx "removed $CERTS/other.example/hosts.toml" <<<"$out" || fail "other.example not removed: $out"
[[ ! -e $CERTS/other.example ]] || fail "other.example's directory is still there"
[[ -e $CERTS/berth.example/hosts.toml ]] || fail "berth.example went too"
runtime check >/dev/null || fail "check found something missing after apply"

log "the agent's metrics: config_path set; without it: unset"
metric() { curl -fsS "http://$1/metrics" | grep -E "^berth_agent_containerd_config_path\\{state=\"$2\"\\} 1\$"; }
# The agent checks the node at start; this one runs with the node's / at / : start another
# agent on the laid-out node by naming its paths directly.
node_agent() {
    jq -n --arg replica "http://$REPLICA" --arg certs "$CERTS" --arg toml "$HOST/etc/containerd/config.toml" \
        '{agent: {replicas: [$replica], authorize: "agent", runtime: {registries: ["berth.example"],
          containerd_hosts_dir: $certs, containerd_config: $toml, crio_dir: "", registries_yaml: []}}}' \
        >"$WORK/node-agent.json"
    BERTH_CONFIG=$WORK/node-agent.json start_registry
}
sed -i "s|\"/etc/containerd/certs.d\"|\"$CERTS\"|" "$HOST/etc/containerd/config.toml"
node_agent
metric "$REGISTRY" set >/dev/null || fail "the agent does not report config_path set"
node_config '# config_path unset'
if runtime check >"$WORK/check.out"; then fail "check passed on a node without config_path"; fi
grep -q '^containerd unset ' "$WORK/check.out" || fail "check did not say unset: $(cat "$WORK/check.out")"
node_agent
metric "$REGISTRY" unset >/dev/null || fail "the agent does not report config_path unset"
grep -q 'containerd does not read the agent' "$REGISTRY_LOG" || fail "the agent did not log the unset config_path"

log "remove: exactly what was written"
out=$(runtime remove)
echo "$out"
[[ ! -e $CERTS/_default && ! -e $CERTS/berth.example ]] || fail "remove left the agent's files"
assert_eq "$hand_sum" "$(sha256sum <"$CERTS/hand.example/hosts.toml")" "the hand-written hosts.toml after remove"
assert_eq 3 "$(grep -c '^removed ' <<<"$out")" "files removed (2 hosts.toml, registries.yaml)"
[[ ! -e $HOST/etc/rancher/k3s/registries.yaml ]] || fail "registries.yaml left behind"
log "ok"
