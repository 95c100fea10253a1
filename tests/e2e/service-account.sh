#!/usr/bin/env bash
# A Kubernetes service account token as the password: skopeo (--dest-creds),
# podman login and docker login push with a token of namespace team-a, as a CI job in a pod would
# with its projected token. berth trusts the issuer's keys (auth.oidc, jwks_file)
# and one rule, "${namespace}/**" for group system:serviceaccounts, gives each
# namespace its own repositories: team-a/app is pushed and read back, team-b/app
# is refused and stays absent, and a token of team-b cannot read team-a's image.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
need skopeo podman docker dockerd containerd ctr openssl jq
[[ -n ${BERTH_BIN:-} ]] || skip "service-account.sh needs berth (BERTH_BIN): it configures berth's authentication"
LIB=$(cd "$(dirname "$0")/../lib" && pwd)
ISSUER=https://kubernetes.default.svc.cluster.local

make_tmpdir WORK
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"

# token NAMESPACE : a projected service account token for berth, signed by the issuer's key.
token() {
    python3 - "$LIB" "$WORK/issuer.key" "$ISSUER" "$1" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import berthauth as a
print(a.make_jwt(a.service_account_claims(sys.argv[4], "builder", sys.argv[3]), sys.argv[2], "RS256",
                 header={"kid": "cluster-key"}))
PY
}

log "the issuer's key set, and berth trusting it"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$WORK/issuer.key" 2>/dev/null
python3 - "$LIB" "$WORK/issuer.key" >"$WORK/jwks.json" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import berthauth as a
print(json.dumps({"keys": [a.public_jwk(sys.argv[2], "cluster-key")]}))
PY
cat >"$WORK/berth.json" <<EOF2
{
  "auth": {
    "oidc": [{ "issuer": "$ISSUER", "service_accounts": true, "audiences": ["berth"], "jwks_file": "jwks.json" }],
    "rules": [
      { "repository": "\${namespace}/**", "principals": ["group:system:serviceaccounts"], "actions": ["pull", "push"] }
    ]
  }
}
EOF2
BERTH_CONFIG=$WORK/berth.json start_registry
TEAM_A=$(token team-a)
TEAM_B=$(token team-b)
REGISTRY_CURL_OPTS=(-u "sa:$TEAM_A")

log "skopeo pushes team-a/app with team-a's token"
oci_make_image "$WORK/src" v1 >/dev/null
SK=(skopeo --insecure-policy)
"${SK[@]}" copy --dest-tls-verify=false --dest-creds "sa:$TEAM_A" "oci:$WORK/src:v1" "docker://$REGISTRY/team-a/app:v1"
assert_eq "$(oci_ref_digest "$WORK/src" v1)" "$(manifest_digest team-a/app v1)" "digest of team-a/app:v1"

log "the same token is refused on team-b/app, which stays absent"
if "${SK[@]}" copy --dest-tls-verify=false --dest-creds "sa:$TEAM_A" "oci:$WORK/src:v1" \
    "docker://$REGISTRY/team-b/app:v1" >"$WORK/refused.out" 2>&1; then
    fail "team-a's token pushed to team-b/app"
fi
grep -qiE 'denied|unauthorized|403' "$WORK/refused.out" || { cat "$WORK/refused.out" >&2; fail "refused, but not for access"; }
assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' -u "sa:$TEAM_B" "$REGISTRY_URL/v2/team-b/app/tags/list")" \
    "team-b/app after the refused push"

log "team-b's token cannot read team-a's image"
if "${SK[@]}" inspect --tls-verify=false --creds "sa:$TEAM_B" "docker://$REGISTRY/team-a/app:v1" >/dev/null 2>&1; then
    fail "team-b's token read team-a/app"
fi

log "podman login with the token, push and pull in team-a"
PODMAN=(podman --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs
        --tmpdir "$WORK/podman-tmp" --cgroup-manager cgroupfs --events-backend file)
export REGISTRY_AUTH_FILE=$WORK/podman-auth.json
[[ -e /run/containers ]] || add_cleanup "rmdir /run/containers/networks /run/containers 2>/dev/null"
add_cleanup "${PODMAN[*]} rmi --all --force >/dev/null 2>&1"
"${PODMAN[@]}" login --tls-verify=false -u sa --password-stdin "$REGISTRY" <<<"$TEAM_A"
oci_docker_archive "$WORK/src" v1 localhost/e2e/sa:v1 "$WORK/image.tar"
"${PODMAN[@]}" load -q -i "$WORK/image.tar" >/dev/null
"${PODMAN[@]}" push --quiet --tls-verify=false --digestfile "$WORK/pushed" localhost/e2e/sa:v1 \
    "docker://$REGISTRY/team-a/podman:v1"
assert_eq "$(cat "$WORK/pushed")" "$(manifest_digest team-a/podman v1)" "digest of team-a/podman:v1"
"${PODMAN[@]}" rmi --all --force >/dev/null
"${PODMAN[@]}" pull --quiet --tls-verify=false "$REGISTRY/team-a/podman:v1" >/dev/null
"${PODMAN[@]}" logout "$REGISTRY" >/dev/null
if "${PODMAN[@]}" pull --quiet --tls-verify=false "$REGISTRY/team-a/app:v1" >/dev/null 2>&1; then
    fail "podman pulled team-a/app after logout"
fi
log "docker login with the token, push and pull in team-a; team-b refused"
start_containerd
start_dockerd
"${DOCKER[@]}" login -u sa --password-stdin "$REGISTRY" <<<"$TEAM_A" | tee "$WORK/docker-login.out"
grep -q "Login Succeeded" "$WORK/docker-login.out" || fail "no 'Login Succeeded' from docker login"
oci_make_image "$WORK/src-docker" v1 >/dev/null
oci_docker_archive "$WORK/src-docker" v1 e2e/sa-docker:v1 "$WORK/docker-image.tar"
"${DOCKER[@]}" load -q -i "$WORK/docker-image.tar" >/dev/null
"${DOCKER[@]}" tag e2e/sa-docker:v1 "$REGISTRY/team-a/docker:v1"
pushed=$("${DOCKER[@]}" push "$REGISTRY/team-a/docker:v1" | awk '/digest: sha256:/ { print $3 }')
assert_eq "$pushed" "$(manifest_digest team-a/docker v1)" "digest of team-a/docker:v1 pushed by docker"
"${DOCKER[@]}" tag e2e/sa-docker:v1 "$REGISTRY/team-b/docker:v1"
if "${DOCKER[@]}" push "$REGISTRY/team-b/docker:v1" >"$WORK/docker-refused.out" 2>&1; then
    fail "docker pushed to team-b/docker with team-a's token"
fi
grep -qiE 'denied|unauthorized|403' "$WORK/docker-refused.out" || { cat "$WORK/docker-refused.out" >&2; fail "docker's push refused, but not for access"; }
"${DOCKER[@]}" rmi "$REGISTRY/team-a/docker:v1" >/dev/null
"${DOCKER[@]}" pull -q "$REGISTRY/team-a/docker:v1" >/dev/null
"${DOCKER[@]}" logout "$REGISTRY" >/dev/null
if "${DOCKER[@]}" pull -q "$REGISTRY/team-a/app:v1" >/dev/null 2>&1; then
    fail "docker pulled team-a/app after logout"
fi
log "service account checks passed"
