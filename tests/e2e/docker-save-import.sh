#!/usr/bin/env bash
# Across the air gap with docker's own carrier: docker load of a locally made image, docker save
# of it, berth import of the archive into a running berth (--url),
# then docker pull from berth: the same image ID; berth export of it, imported into a fresh
# store, holds the same manifest.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
. "$(dirname "$0")/../lib/oci.sh"
. "$(dirname "$0")/../lib/containerd.sh"
need docker dockerd containerd ctr jq
[[ -n ${BERTH_BIN:-} ]] || skip "needs BERTH_BIN (berth import)"

make_tmpdir WORK
start_registry
start_containerd
start_dockerd

log "docker load of a locally made image, then docker save"
oci_make_image "$WORK/src" v1 >/dev/null
config=$(oci_manifest_blobs "$WORK/src" "$(oci_ref_digest "$WORK/src" v1)" | head -n 1)
oci_docker_archive "$WORK/src" v1 e2e/local:v1 "$WORK/image.tar"
"${DOCKER[@]}" load -i "$WORK/image.tar" >/dev/null
"${DOCKER[@]}" tag e2e/local:v1 airgap/saved:v1
"${DOCKER[@]}" save -o "$WORK/saved.tar" airgap/saved:v1

log "berth import --url of docker's archive"
"$BERTH_BIN" import --url "$REGISTRY_URL" "$WORK/saved.tar" | tee "$WORK/import.out"
grep -q "^loaded .*airgap/saved:v1$" "$WORK/import.out" || fail "the archive's image was not loaded under its name"
repo=$(sed -n 's/^loaded \(.*\):v1$/\1/p' "$WORK/import.out")

log "docker pull $REGISTRY/$repo:v1: the image docker saved"
"${DOCKER[@]}" rmi e2e/local:v1 airgap/saved:v1 >/dev/null
"${DOCKER[@]}" pull "$REGISTRY/$repo:v1" >/dev/null
assert_eq "$config" "$("${DOCKER[@]}" image inspect -f '{{.Id}}' "$REGISTRY/$repo:v1")" "image ID after import and pull"

log "berth export from the running berth, berth import --root into a fresh store"
"$BERTH_BIN" export --url "$REGISTRY_URL" "$repo:v1" --to "$WORK/exported.tar"
"$BERTH_BIN" import --root "$WORK/fresh" "$WORK/exported.tar" | tee "$WORK/import2.out"
grep -q "^loaded $repo:v1$" "$WORK/import2.out" || fail "the exported image was not loaded under its name"
served=$(manifest_digest "$repo" v1)
"$BERTH_BIN" export --root "$WORK/fresh" "$repo:v1" --to "$WORK/check"
assert_eq "$served" "$(jq -r '.manifests[0].digest' "$WORK/check/index.json")" "the manifest in the fresh store"
log "docker-save import checks passed"
