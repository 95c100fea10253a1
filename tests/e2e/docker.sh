#!/usr/bin/env bash
# docker (a private dockerd on a private containerd): load a hand-made image,
# push it, remove it, pull it back; image ID and digests must match.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
need docker dockerd containerd ctr

make_tmpdir WORK
start_registry
start_containerd
start_dockerd
REF=$REGISTRY/e2e/docker:v1

log "docker load of a locally made image"
oci_make_image "$WORK/src" v1 >/dev/null
config=$(oci_manifest_blobs "$WORK/src" "$(oci_ref_digest "$WORK/src" v1)" | head -n 1)
oci_docker_archive "$WORK/src" v1 e2e/local:v1 "$WORK/image.tar"
"${DOCKER[@]}" load -i "$WORK/image.tar"
assert_eq "$config" "$("${DOCKER[@]}" image inspect -f '{{.Id}}' e2e/local:v1)" "image ID after load"

log "docker tag + push $REF"
"${DOCKER[@]}" tag e2e/local:v1 "$REF"
"${DOCKER[@]}" push "$REF" | tee "$WORK/push.out"
pushed=$(sed -n 's/.*digest: \(sha256:[0-9a-f]\{64\}\) size.*/\1/p' "$WORK/push.out")
[[ -n $pushed ]] || fail "no digest in docker push output"
assert_eq "$pushed" "$(manifest_digest e2e/docker v1)" "registry digest of $REF"
get_manifest e2e/docker v1 >"$WORK/remote-manifest.json"
assert_eq "$pushed" "sha256:$(sha256_of "$WORK/remote-manifest.json")" "sha256 of the manifest bytes served"
assert_eq application/vnd.docker.distribution.manifest.v2+json "$(jq -r .mediaType "$WORK/remote-manifest.json")" "manifest mediaType"
assert_eq "$config" "$(jq -r .config.digest "$WORK/remote-manifest.json")" "config digest in the pushed manifest"
# docker re-compresses layers on push: check what the registry serves
# decompresses to the layer diff_ids of the image config
diff_ids=$(jq -r '.rootfs.diff_ids[]' "$(oci_blob_path "$WORK/src" "$config")")
served=$(for l in $(jq -r '.layers[].digest' "$WORK/remote-manifest.json"); do
    curl -sf "$REGISTRY_URL/v2/e2e/docker/blobs/$l" -o "$WORK/layer"
    assert_eq "$l" "sha256:$(sha256_of "$WORK/layer")" "sha256 of layer blob served" >&2
    echo "sha256:$(gzip -dc "$WORK/layer" | sha256sum | cut -d' ' -f1)"
done)
assert_eq "$diff_ids" "$served" "uncompressed digests of the pushed layers"

log "docker rmi, then docker pull $REF"
"${DOCKER[@]}" rmi e2e/local:v1 "$REF"
if "${DOCKER[@]}" image inspect "$config" >/dev/null 2>&1; then fail "image still present after rmi"; fi
"${DOCKER[@]}" pull "$REF"
assert_eq "$config" "$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$REF")" "image ID after pull"
assert_eq "$REGISTRY/e2e/docker@$pushed" "$("${DOCKER[@]}" image inspect -f '{{index .RepoDigests 0}}' "$REF")" "RepoDigests after pull"

log "docker pull by digest"
"${DOCKER[@]}" rmi "$REF" >/dev/null
"${DOCKER[@]}" pull "$REGISTRY/e2e/docker@$pushed"
assert_eq "$config" "$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$REGISTRY/e2e/docker@$pushed")" "image ID after pull by digest"
log "docker checks passed"
