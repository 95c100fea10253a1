#!/usr/bin/env bash
# docker login and podman login against berth with htpasswd users and berth's
# built-in token endpoint (Bearer challenge -> /auth/token with Basic
# credentials -> JWT). A wrong password fails to log in; logged in, each client
# pushes a locally made image to the user's own namespace and pulls it back
# (digests and image IDs equal); pushing into another user's namespace and
# pulling after logout are refused.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
need docker dockerd containerd ctr podman htpasswd openssl
[[ -n ${BERTH_BIN:-} ]] || skip "login.sh needs berth (BERTH_BIN): it configures berth's authentication"

# refused_for_auth FILE : the client's output says access was denied / unauthorized.
refused_for_auth() {
    grep -qiE 'denied|unauthorized|authentication required|invalid username|401|403' "$1" ||
        { cat "$1" >&2; fail "refused, but not for lack of access (see output above)"; }
}

make_tmpdir WORK
export TMPDIR=$WORK/tmp   # containers/image stages blobs here (default /var/tmp)
mkdir -p "$TMPDIR"

log "users, token key and configuration"
htpasswd -cbB "$WORK/htpasswd" alice alice-secret 2>/dev/null
htpasswd -bB "$WORK/htpasswd" bob bob-secret 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$WORK/token.key" 2>/dev/null
cat >"$WORK/berth.json" <<'EOF'
{
  "auth": {
    "htpasswd": "htpasswd",
    "token": { "signing_key": "token.key", "service": "berth", "ttl_seconds": 300 },
    "rules": [
      { "repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push", "delete"] }
    ]
  }
}
EOF
BERTH_CONFIG=$WORK/berth.json start_registry
REGISTRY_CURL_OPTS=(-u alice:alice-secret)

log "anonymous GET /v2/ is challenged with a Bearer realm on this registry"
code=$(curl -s -o /dev/null -w '%{http_code}' "$REGISTRY_URL/v2/")
assert_eq 401 "$code" "anonymous GET /v2/ status"
challenge=$(curl -s -D - -o /dev/null "$REGISTRY_URL/v2/" | tr -d '\r' | sed -n 's/^[Ww][Ww][Ww]-[Aa]uthenticate: //p')
assert_eq "Bearer realm=\"$REGISTRY_URL/auth/token\",service=\"berth\"" "$challenge" "WWW-Authenticate"
token=$(curl -sf -u alice:alice-secret "$REGISTRY_URL/auth/token?service=berth&scope=repository:alice/x:pull" | jq -r .token)
assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" "$REGISTRY_URL/v2/")" "GET /v2/ with a token"

# ---------------------------------------------------------------- docker
start_containerd
start_dockerd

log "docker login with a wrong password fails"
if "${DOCKER[@]}" login -u alice --password-stdin "$REGISTRY" <<<"wrong-secret" >"$WORK/docker-login.out" 2>&1; then
    cat "$WORK/docker-login.out" >&2
    fail "docker login succeeded with a wrong password"
fi
grep -qi 'unauthorized\|401\|incorrect' "$WORK/docker-login.out" || { cat "$WORK/docker-login.out" >&2; fail "docker login failed, but not for the password"; }
if "${DOCKER[@]}" login -u mallory --password-stdin "$REGISTRY" <<<"alice-secret" >/dev/null 2>&1; then
    fail "docker login succeeded for an unknown user"
fi

log "docker login alice"
"${DOCKER[@]}" login -u alice --password-stdin "$REGISTRY" <<<"alice-secret" | tee "$WORK/docker-login.out"
grep -q "Login Succeeded" "$WORK/docker-login.out" || fail "no 'Login Succeeded' from docker login"
jq -e --arg r "$REGISTRY" '.auths[$r]' "$DOCKER_CONFIG/config.json" >/dev/null || fail "no credentials for $REGISTRY in docker's config.json"

log "docker push and pull as alice"
oci_make_image "$WORK/src-docker" v1 >/dev/null
config=$(oci_manifest_blobs "$WORK/src-docker" "$(oci_ref_digest "$WORK/src-docker" v1)" | head -n 1)
oci_docker_archive "$WORK/src-docker" v1 e2e/local:v1 "$WORK/docker-image.tar"
"${DOCKER[@]}" load -i "$WORK/docker-image.tar"
REF=$REGISTRY/alice/docker:v1
"${DOCKER[@]}" tag e2e/local:v1 "$REF"
"${DOCKER[@]}" push "$REF" | tee "$WORK/push.out"
pushed=$(sed -n 's/.*digest: \(sha256:[0-9a-f]\{64\}\) size.*/\1/p' "$WORK/push.out")
[[ -n $pushed ]] || fail "no digest in docker push output"
assert_eq "$pushed" "$(manifest_digest alice/docker v1)" "registry digest of $REF"
get_manifest alice/docker v1 >"$WORK/remote-manifest.json"
assert_eq "$pushed" "sha256:$(sha256_of "$WORK/remote-manifest.json")" "sha256 of the manifest bytes served"
assert_eq "$config" "$(jq -r .config.digest "$WORK/remote-manifest.json")" "config digest in the pushed manifest"
curl -sf "${REGISTRY_CURL_OPTS[@]}" "$REGISTRY_URL/v2/alice/docker/blobs/$config" -o "$WORK/config.json"
cmp "$WORK/config.json" "$(oci_blob_path "$WORK/src-docker" "$config")" || fail "config blob bytes differ"
"${DOCKER[@]}" rmi e2e/local:v1 "$REF" >/dev/null
"${DOCKER[@]}" pull "$REF"
assert_eq "$config" "$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$REF")" "image ID after docker pull"
assert_eq "$REGISTRY/alice/docker@$pushed" "$("${DOCKER[@]}" image inspect -f '{{index .RepoDigests 0}}' "$REF")" "RepoDigests after docker pull"

log "docker push into bob's namespace is refused for alice"
"${DOCKER[@]}" tag "$REF" "$REGISTRY/bob/docker:v1"
if "${DOCKER[@]}" push "$REGISTRY/bob/docker:v1" >"$WORK/push-bob.out" 2>&1; then
    cat "$WORK/push-bob.out" >&2
    fail "alice pushed into bob/"
fi
refused_for_auth "$WORK/push-bob.out"
assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' -u bob:bob-secret "$REGISTRY_URL/v2/bob/docker/manifests/v1")" "bob/docker:v1 after the refused push"

log "docker logout: pulling is refused"
"${DOCKER[@]}" logout "$REGISTRY"
"${DOCKER[@]}" rmi "$REF" "$REGISTRY/bob/docker:v1" >/dev/null
if "${DOCKER[@]}" pull "$REF" >"$WORK/pull-anon.out" 2>&1; then
    fail "anonymous docker pull succeeded"
fi
refused_for_auth "$WORK/pull-anon.out"
log "ok: anonymous docker pull refused: $(tail -n 1 "$WORK/pull-anon.out")"

# ---------------------------------------------------------------- podman
PODMAN=(podman --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs
        --tmpdir "$WORK/podman-tmp" --cgroup-manager cgroupfs --events-backend file)
export REGISTRY_AUTH_FILE=$WORK/podman-auth.json
[[ -e /run/containers ]] || add_cleanup "rmdir /run/containers/networks /run/containers 2>/dev/null"
add_cleanup "${PODMAN[*]} rmi --all --force >/dev/null 2>&1"

log "podman login with a wrong password fails"
if "${PODMAN[@]}" login --tls-verify=false -u alice -p wrong-secret "$REGISTRY" >"$WORK/podman-login.out" 2>&1; then
    cat "$WORK/podman-login.out" >&2
    fail "podman login succeeded with a wrong password"
fi
refused_for_auth "$WORK/podman-login.out"
[[ ! -s $REGISTRY_AUTH_FILE ]] || ! jq -e --arg r "$REGISTRY" '.auths[$r]' "$REGISTRY_AUTH_FILE" >/dev/null ||
    fail "podman stored credentials after a failed login"

log "podman login alice"
"${PODMAN[@]}" login --tls-verify=false -u alice --password-stdin "$REGISTRY" <<<"alice-secret"
jq -e --arg r "$REGISTRY" '.auths[$r]' "$REGISTRY_AUTH_FILE" >/dev/null || fail "no credentials for $REGISTRY in $REGISTRY_AUTH_FILE"

log "podman push and pull as alice"
oci_make_image "$WORK/src-podman" v1 >/dev/null
config=$(oci_manifest_blobs "$WORK/src-podman" "$(oci_ref_digest "$WORK/src-podman" v1)" | head -n 1)
oci_docker_archive "$WORK/src-podman" v1 localhost/e2e/podman:v1 "$WORK/podman-image.tar"
"${PODMAN[@]}" load -q -i "$WORK/podman-image.tar" >/dev/null
REF=$REGISTRY/alice/podman:v1
"${PODMAN[@]}" push --quiet --tls-verify=false --digestfile "$WORK/pushed-podman" localhost/e2e/podman:v1 "docker://$REF"
pushed=$(cat "$WORK/pushed-podman")
assert_eq "$pushed" "$(manifest_digest alice/podman v1)" "registry digest of $REF"
assert_eq "$config" "$(get_manifest alice/podman v1 | jq -r .config.digest)" "config digest in the pushed manifest"
for l in $(get_manifest alice/podman v1 | jq -r '.layers[].digest'); do
    curl -sf "${REGISTRY_CURL_OPTS[@]}" "$REGISTRY_URL/v2/alice/podman/blobs/$l" -o "$WORK/layer"
    assert_eq "$l" "sha256:$(sha256_of "$WORK/layer")" "sha256 of layer blob served"
done
"${PODMAN[@]}" rmi --all --force >/dev/null
"${PODMAN[@]}" pull --quiet --tls-verify=false "$REF" >/dev/null
inspect=$("${PODMAN[@]}" image inspect "$REF")
assert_eq "$pushed" "$(jq -r '.[0].Digest' <<<"$inspect")" "podman image digest"
assert_eq "${config#sha256:}" "$(jq -r '.[0].Id' <<<"$inspect")" "podman image ID"

log "podman push into bob's namespace is refused for alice"
if "${PODMAN[@]}" push --tls-verify=false "$REF" "docker://$REGISTRY/bob/podman:v1" >"$WORK/podman-bob.out" 2>&1; then
    fail "alice pushed into bob/ with podman"
fi
refused_for_auth "$WORK/podman-bob.out"
log "ok: refused: $(grep -v "^\s*$" "$WORK/podman-bob.out" | tail -n 1)"

log "podman logout: pulling is refused"
"${PODMAN[@]}" logout "$REGISTRY"
"${PODMAN[@]}" rmi --all --force >/dev/null
if "${PODMAN[@]}" pull --quiet --tls-verify=false "$REF" >"$WORK/podman-anon.out" 2>&1; then
    fail "anonymous podman pull succeeded"
fi
refused_for_auth "$WORK/podman-anon.out"
log "ok: anonymous podman pull refused: $(grep -v "^\s*$" "$WORK/podman-anon.out" | tail -n 1)"

log "bob logs in with podman and pulls nothing of alice's"
"${PODMAN[@]}" login --tls-verify=false -u bob -p bob-secret "$REGISTRY" >/dev/null
if "${PODMAN[@]}" pull --quiet --tls-verify=false "$REF" >"$WORK/podman-bob-pull.out" 2>&1; then
    fail "bob pulled alice/podman"
fi
refused_for_auth "$WORK/podman-bob-pull.out"
log "login checks passed"
