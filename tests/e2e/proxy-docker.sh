#!/usr/bin/env bash
# docker pulling library/e2e:v1 (docker.io) with berth as its registry mirror
# (dockerd --registry-mirror, through the daemon config): the image is seeded
# only into a CNCF Distribution on loopback, berth's docker.io upstream.
# dockerd sends the mirror unprefixed names without ns (/v2/library/e2e/...),
# which berth resolves to docker.io/library/e2e. The pull succeeds with every
# upstream request made by berth; then the upstream is stopped, the image
# removed, and the pull succeeds again from berth's cache.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
. "$(dirname "$0")/../lib/distribution.sh"
need docker dockerd containerd ctr skopeo docker-registry
[[ -n ${BERTH_BIN:-} ]] || skip "proxy-docker.sh needs berth (BERTH_BIN): it tests berth's registry proxying"

make_tmpdir WORK

log "upstream: a Distribution seeded with library/e2e:v1"
start_upstream
want=$(oci_make_image "$WORK/src" v1)
config=$(oci_manifest_blobs "$WORK/src" "$want" | head -n 1)
upstream_seed "$WORK/src" v1 library/e2e:v1

log "berth mirroring docker.io from it"
jq -n --arg url "$UPSTREAM_URL" \
    '{log: {access: true}, proxy: {upstreams: [{host: "docker.io", url: $url}]}}' >"$WORK/berth.json"
BERTH_CONFIG=$WORK/berth.json start_registry
BERTH_LOG=$REGISTRY_LOG

start_containerd
DOCKERD_REGISTRY_MIRRORS="http://$REGISTRY" start_dockerd
mirrors=$("${DOCKER[@]}" info --format '{{json .RegistryConfig.Mirrors}}')
assert_eq "[\"http://$REGISTRY/\"]" "$mirrors" "dockerd's registry mirrors"

log "docker pull library/e2e:v1 (docker.io, through the mirror)"
"${DOCKER[@]}" pull library/e2e:v1
assert_eq "$config" "$("${DOCKER[@]}" image inspect -f '{{.Id}}' library/e2e:v1)" "image ID after pull"
assert_eq "e2e@$want" "$("${DOCKER[@]}" image inspect -f '{{index .RepoDigests 0}}' library/e2e:v1)" "RepoDigests"

ok=$(jq -r 'select(.msg == "request" and (.target | test("^/v2/library/e2e/(manifests|blobs)/")) and .status == 200) | .target' \
    "$BERTH_LOG" | sort -u | wc -l)
((ok >= 3)) || { grep '"request"' "$BERTH_LOG" >&2; fail "berth answered $ok distinct /v2/library/e2e/ requests with 200 (want >= 3)"; }
log "ok: berth answered $ok distinct unprefixed /v2/library/e2e/ requests with 200"
if upstream_requests '(GET|HEAD) /v2/' | grep -q '"docker/'; then
    upstream_requests '(GET|HEAD) /v2/' >&2
    fail "dockerd reached the upstream itself"
fi
[[ -n $(upstream_requests 'GET /v2/library/e2e/blobs/') ]] || fail "the upstream saw no blob GET from berth"
assert_eq "$want" "$(manifest_digest docker.io/library/e2e v1)" "berth's local docker.io/library/e2e:v1"

log "upstream stopped; docker rmi; pull again from berth's cache"
stop_upstream
"${DOCKER[@]}" rmi library/e2e:v1
if "${DOCKER[@]}" image inspect "$config" >/dev/null 2>&1; then fail "image still present after rmi"; fi
before=$(wc -l <"$BERTH_LOG")
"${DOCKER[@]}" pull library/e2e:v1
assert_eq "$config" "$("${DOCKER[@]}" image inspect -f '{{.Id}}' library/e2e:v1)" "image ID after the cached pull"
served=$(tail -n +"$((before + 1))" "$BERTH_LOG" |
    jq -r 'select(.msg == "request" and (.target | test("^/v2/library/e2e/")) and .status == 200 and .cache == "hit") | .target' |
    wc -l)
((served >= 3)) || fail "berth answered $served requests of the second pull from its cache (want >= 3)"
log "proxy docker checks passed"
