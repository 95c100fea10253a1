#!/usr/bin/env bash
# skopeo: push a hand-made OCI layout, pull it back, compare every digest and
# byte; inspect, list-tags, delete.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
need skopeo

make_tmpdir WORK
start_registry
REPO=e2e/skopeo
SK=(skopeo --insecure-policy)

log "building a local OCI layout"
want=$(oci_make_image "$WORK/src" v1)

log "skopeo copy oci -> docker://$REGISTRY/$REPO:v1"
"${SK[@]}" copy --dest-tls-verify=false "oci:$WORK/src:v1" "docker://$REGISTRY/$REPO:v1"
assert_eq "$want" "$(manifest_digest "$REPO" v1)" "registry digest of $REPO:v1"

log "skopeo copy docker:// -> oci (a fresh layout)"
"${SK[@]}" copy --src-tls-verify=false "docker://$REGISTRY/$REPO:v1" "oci:$WORK/back:v1"
assert_eq "$want" "$(oci_ref_digest "$WORK/back" v1)" "manifest digest pulled back"
cmp "$(oci_blob_path "$WORK/src" "$want")" "$(oci_blob_path "$WORK/back" "$want")" ||
    fail "manifest bytes differ"
blobs=$(oci_manifest_blobs "$WORK/src" "$want")
assert_eq 3 "$(wc -l <<<"$blobs")" "config + layer count"
assert_eq "$blobs" "$(oci_manifest_blobs "$WORK/back" "$want")" "config and layer digests"
for d in $blobs; do
    cmp "$(oci_blob_path "$WORK/src" "$d")" "$(oci_blob_path "$WORK/back" "$d")" ||
        fail "blob $d: bytes pulled differ from bytes pushed"
    assert_eq "$d" "sha256:$(sha256_of "$(oci_blob_path "$WORK/back" "$d")")" "sha256 of pulled blob"
done

log "skopeo inspect"
inspect=$("${SK[@]}" inspect --tls-verify=false "docker://$REGISTRY/$REPO:v1")
assert_eq "$want" "$(jq -r .Digest <<<"$inspect")" "inspect .Digest"
assert_eq amd64 "$(jq -r .Architecture <<<"$inspect")" "inspect .Architecture"
assert_eq "$(oci_manifest_blobs "$WORK/src" "$want" | tail -n 2)" "$(jq -r '.Layers[]' <<<"$inspect")" "inspect .Layers"
raw=$("${SK[@]}" inspect --raw --tls-verify=false "docker://$REGISTRY/$REPO:v1" | sha256sum | cut -d' ' -f1)
assert_eq "$want" "sha256:$raw" "sha256 of inspect --raw"
config_sum=$("${SK[@]}" inspect --config --raw --tls-verify=false "docker://$REGISTRY/$REPO:v1" | sha256sum | cut -d' ' -f1)
assert_eq "$(oci_manifest_blobs "$WORK/src" "$want" | head -n 1)" "sha256:$config_sum" "sha256 of inspect --config --raw"

log "skopeo list-tags"
"${SK[@]}" copy --dest-tls-verify=false "oci:$WORK/src:v1" "docker://$REGISTRY/$REPO:v2"
tags=$("${SK[@]}" list-tags --tls-verify=false "docker://$REGISTRY/$REPO" | jq -r '.Tags | sort | join(",")')
assert_eq "v1,v2" "$tags" "list-tags"

log "skopeo delete"
"${SK[@]}" delete --tls-verify=false "docker://$REGISTRY/$REPO:v1"
if "${SK[@]}" inspect --tls-verify=false "docker://$REGISTRY/$REPO:v1" >/dev/null 2>&1; then
    fail "inspect of $REPO:v1 still succeeds after delete"
fi
if "${SK[@]}" inspect --tls-verify=false "docker://$REGISTRY/$REPO:v2" >/dev/null 2>&1; then
    fail "inspect of $REPO:v2 succeeds although its manifest was deleted (v1 and v2 share it)"
fi
assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' "$REGISTRY_URL/v2/$REPO/manifests/$want")" \
    "GET manifest by digest after delete"
log "skopeo checks passed"
