#!/usr/bin/env bash
# containerd's ctr (private containerd): import hand-made images (a single
# manifest and an amd64+arm64 index), push them with --plain-http, delete them
# locally, pull them back; digests and blob bytes must match.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
need containerd ctr

make_tmpdir WORK
start_registry
start_containerd
REPO=$REGISTRY/e2e/ctr

log "ctr images import of a locally made OCI archive"
single=$(oci_make_image "$WORK/src" v1)
multi=$(oci_make_index "$WORK/src" multi amd64 arm64)
oci_tar "$WORK/src" "$WORK/oci.tar"
"${CTR[@]}" images import --all-platforms --no-unpack --base-name "$REPO" "$WORK/oci.tar"
image_target() { "${CTR[@]}" images ls | awk -v r="$1" '$1 == r { print $3 }'; }
assert_eq "$single" "$(image_target "$REPO:v1")" "imported $REPO:v1"
assert_eq "$multi" "$(image_target "$REPO:multi")" "imported $REPO:multi"

# every blob of both images: index, manifests, configs, layers
all_blobs() {
    local m
    echo "$single" "$multi"
    oci_manifest_blobs "$WORK/src" "$single"
    for m in $(jq -r '.manifests[].digest' "$(oci_blob_path "$WORK/src" "$multi")"); do
        echo "$m"
        oci_manifest_blobs "$WORK/src" "$m"
    done
}
blobs=$(all_blobs | tr ' ' '\n')
assert_eq 13 "$(wc -l <<<"$blobs")" "blob count (single: manifest+config+2 layers; multi: index+2x4)"

for tag in v1 multi; do
    log "ctr images push --plain-http $REPO:$tag"
    # With --debug, a failure shows which request failed first (ctr cancels the others).
    if ! "${CTR[@]}" --debug images push --plain-http "$REPO:$tag" >"$WORK/push-$tag.log" 2>&1; then
        tail -n 60 "$WORK/push-$tag.log" >&2
        fail "ctr images push $REPO:$tag"
    fi
done
assert_eq "$single" "$(manifest_digest e2e/ctr v1)" "registry digest of e2e/ctr:v1"
assert_eq "$multi" "$(manifest_digest e2e/ctr multi)" "registry digest of e2e/ctr:multi"
for d in $blobs; do
    # manifests live under /manifests/, everything else under /blobs/
    if [[ $d == "$single" || $d == "$multi" ]] || jq -e '.manifests[] | select(.digest == "'"$d"'")' \
            "$(oci_blob_path "$WORK/src" "$multi")" >/dev/null; then
        get_manifest e2e/ctr "$d" >"$WORK/remote"
    else
        curl -sf "$REGISTRY_URL/v2/e2e/ctr/blobs/$d" -o "$WORK/remote"
    fi
    cmp "$(oci_blob_path "$WORK/src" "$d")" "$WORK/remote" || fail "registry bytes of $d differ from local"
done
log "ok: all 13 blobs in the registry equal the local bytes"

log "delete the images and their content locally"
"${CTR[@]}" images rm --sync "$REPO:v1" "$REPO:multi"
left=$("${CTR[@]}" content ls -q | grep -cFf <(echo "$blobs") || true)
assert_eq 0 "$left" "blobs left in containerd's content store"

log "ctr images pull --plain-http"
"${CTR[@]}" images pull --plain-http "$REPO:v1"
"${CTR[@]}" images pull --plain-http --all-platforms "$REPO:multi"
assert_eq "$single" "$(image_target "$REPO:v1")" "pulled $REPO:v1"
assert_eq "$multi" "$(image_target "$REPO:multi")" "pulled $REPO:multi"
for d in $blobs; do
    "${CTR[@]}" content get "$d" >"$WORK/pulled" || fail "blob $d missing after pull"
    cmp "$(oci_blob_path "$WORK/src" "$d")" "$WORK/pulled" || fail "pulled bytes of $d differ from local"
done
log "ok: all 13 blobs pulled equal the local bytes"

log "ctr images pull by digest"
"${CTR[@]}" images pull --plain-http "$REPO@$single" >/dev/null
assert_eq "$single" "$(image_target "$REPO@$single")" "pulled $REPO@$single"
log "containerd checks passed"
