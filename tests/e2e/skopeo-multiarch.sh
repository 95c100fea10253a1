#!/usr/bin/env bash
# skopeo --all: push an OCI image index (amd64 + arm64) and pull it back;
# index and child manifest digests and all blob bytes must survive.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
need skopeo

make_tmpdir WORK
start_registry
REPO=e2e/multiarch
SK=(skopeo --insecure-policy)

log "building a local OCI layout with an amd64+arm64 index"
want=$(oci_make_index "$WORK/src" v1 amd64 arm64)
children=$(jq -r '.manifests[].digest' "$(oci_blob_path "$WORK/src" "$want")")
assert_eq 2 "$(wc -l <<<"$children")" "child manifests in the local index"

log "skopeo copy --all oci -> docker://$REGISTRY/$REPO:v1"
"${SK[@]}" copy --all --dest-tls-verify=false "oci:$WORK/src:v1" "docker://$REGISTRY/$REPO:v1"
assert_eq "$want" "$(manifest_digest "$REPO" v1)" "registry digest of $REPO:v1"
get_manifest "$REPO" v1 >"$WORK/remote-index.json"
cmp "$(oci_blob_path "$WORK/src" "$want")" "$WORK/remote-index.json" || fail "index bytes in the registry differ"
for c in $children; do
    assert_eq "$c" "$(manifest_digest "$REPO" "$c")" "registry has child manifest"
done

log "skopeo copy --all docker:// -> oci (a fresh layout)"
"${SK[@]}" copy --all --src-tls-verify=false "docker://$REGISTRY/$REPO:v1" "oci:$WORK/back:v1"
assert_eq "$want" "$(oci_ref_digest "$WORK/back" v1)" "index digest pulled back"
assert_eq "$children" "$(jq -r '.manifests[].digest' "$(oci_blob_path "$WORK/back" "$want")")" "child digests"
assert_eq "amd64 arm64" "$(jq -r '[.manifests[].platform.architecture] | join(" ")' "$(oci_blob_path "$WORK/back" "$want")")" "child platforms"
n=0
for b in $want $children $(for c in $children; do oci_manifest_blobs "$WORK/src" "$c"; done); do
    cmp "$(oci_blob_path "$WORK/src" "$b")" "$(oci_blob_path "$WORK/back" "$b")" ||
        fail "blob $b: bytes pulled differ from bytes pushed"
    n=$((n + 1))
done
assert_eq 9 "$n" "blobs compared byte for byte (index + 2 manifests + 2x(config + 2 layers))"

log "per-platform pull"
for arch in amd64 arm64; do
    want_child=$(jq -r --arg a "$arch" '.manifests[] | select(.platform.architecture == $a) | .digest' \
        "$(oci_blob_path "$WORK/src" "$want")")
    arch_seen=$("${SK[@]}" inspect --override-arch "$arch" --config --tls-verify=false \
        "docker://$REGISTRY/$REPO:v1" | jq -r .architecture)
    assert_eq "$arch" "$arch_seen" "config architecture selected for $arch"
    "${SK[@]}" copy --override-arch "$arch" --src-tls-verify=false "docker://$REGISTRY/$REPO:v1" "oci:$WORK/$arch:v1" >/dev/null
    assert_eq "$want_child" "$(oci_ref_digest "$WORK/$arch" v1)" "manifest digest pulled for $arch"
done
log "multi-arch checks passed"
