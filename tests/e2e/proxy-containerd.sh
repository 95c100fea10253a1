#!/usr/bin/env bash
# containerd pulling docker.io/library/e2e:v1 through berth as its mirror:
# the image is seeded only into a CNCF Distribution (the "docker.io" of this
# test, on loopback); berth proxies docker.io to it; a private containerd's
# hosts dir names berth as a pull/resolve mirror, so containerd asks berth with
# ?ns=docker.io. The pull succeeds with berth doing every upstream request,
# berth logs the ns requests and now holds docker.io/library/e2e itself. Then
# the upstream is stopped, the image and its content removed from containerd,
# and the same pull succeeds from berth's cache.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
. "$(dirname "$0")/../lib/distribution.sh"
need containerd ctr skopeo docker-registry
[[ -n ${BERTH_BIN:-} ]] || skip "proxy-containerd.sh needs berth (BERTH_BIN): it tests berth's registry proxying"

make_tmpdir WORK
IMAGE=docker.io/library/e2e:v1

log "upstream: a Distribution seeded with library/e2e:v1"
start_upstream
want=$(oci_make_image "$WORK/src" v1)
upstream_seed "$WORK/src" v1 library/e2e:v1
blobs=$(oci_manifest_blobs "$WORK/src" "$want")

log "berth mirroring docker.io from it"
jq -n --arg url "$UPSTREAM_URL" \
    '{log: {access: true}, proxy: {upstreams: [{host: "docker.io", url: $url}]}}' >"$WORK/berth.json"
BERTH_CONFIG=$WORK/berth.json start_registry
BERTH_LOG=$REGISTRY_LOG
in_catalog() { curl -sf "$REGISTRY_URL/v2/_catalog?n=10000" | jq '[.repositories[] | select(. == "docker.io/library/e2e")] | length'; }
assert_eq 0 "$(in_catalog)" "docker.io/library/e2e in berth's catalog before the pull"

start_containerd
mkdir -p "$WORK/hosts/docker.io"
cat >"$WORK/hosts/docker.io/hosts.toml" <<EOF
server = "$UPSTREAM_URL"

[host."http://$REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF

image_target() { "${CTR[@]}" images ls | awk -v r="$1" '$1 == r { print $3 }'; }
check_content() {
    local d
    for d in $want $blobs; do
        "${CTR[@]}" content get "$d" >"$WORK/pulled" || fail "blob $d missing after pull"
        cmp "$(oci_blob_path "$WORK/src" "$d")" "$WORK/pulled" || fail "pulled bytes of $d differ"
    done
    log "ok: manifest, config and layers in containerd equal the seeded bytes"
}

log "ctr images pull --hosts-dir (berth as the docker.io mirror)"
"${CTR[@]}" images pull --hosts-dir "$WORK/hosts" "$IMAGE"
assert_eq "$want" "$(image_target "$IMAGE")" "pulled $IMAGE"
check_content

# containerd went to berth, with ns=docker.io, and berth answered
ns_ok=$(jq -r 'select(.msg == "request" and (.target | test("^/v2/library/e2e/(manifests|blobs)/.*[?&]ns=docker\\.io")) and .status == 200) | .target' \
    "$BERTH_LOG" | sort -u | wc -l)
((ns_ok >= 4)) || { grep '"request"' "$BERTH_LOG" >&2; fail "berth answered $ns_ok distinct ns=docker.io manifest/blob requests with 200 (want >= 4)"; }
log "ok: berth answered $ns_ok distinct ?ns=docker.io requests with 200"
fetched=$(jq -r 'select(.msg == "request" and .cache == "fetched") | .target' "$BERTH_LOG" | wc -l)
((fetched >= 3)) || fail "berth's access log marks $fetched requests as fetched from the upstream (want >= 3)"
# every upstream request was berth's, none containerd's own fallback to the server
if upstream_requests '(GET|HEAD) /v2/library/e2e/' | grep -q '"containerd/'; then
    upstream_requests '(GET|HEAD) /v2/library/e2e/' >&2
    fail "containerd pulled from the upstream itself: the mirror was not used"
fi
[[ -n $(upstream_requests 'GET /v2/library/e2e/blobs/') ]] || fail "the upstream saw no blob GET from berth"

# berth holds the image now under docker.io/library/e2e
assert_eq "$want" "$(manifest_digest docker.io/library/e2e v1)" "berth's local docker.io/library/e2e:v1"
assert_eq 1 "$(in_catalog)" "docker.io/library/e2e in berth's catalog"

log "upstream stopped; image and content removed from containerd; pull again"
stop_upstream
"${CTR[@]}" images rm --sync "$IMAGE"
"${CTR[@]}" content prune references >/dev/null 2>&1 || true
for d in $want $blobs; do "${CTR[@]}" content rm "$d" >/dev/null 2>&1 || true; done
left=$("${CTR[@]}" content ls -q | grep -cFx -f <(printf '%s\n' "$want" "$blobs") || true)
assert_eq 0 "$left" "image blobs left in containerd's content store"
before=$(wc -l <"$BERTH_LOG")
"${CTR[@]}" images pull --hosts-dir "$WORK/hosts" "$IMAGE"
assert_eq "$want" "$(image_target "$IMAGE")" "pulled $IMAGE from berth's cache"
check_content
served=$(tail -n +"$((before + 1))" "$BERTH_LOG" |
    jq -r 'select(.msg == "request" and (.target | test("[?&]ns=docker\\.io")) and .status == 200 and .cache == "hit") | .target' |
    wc -l)
((served >= 3)) || fail "berth answered $served ns requests of the second pull from its cache (want >= 3)"
log "proxy containerd checks passed"
