#!/usr/bin/env bash
# buildah builds an image from scratch and pushes it (OCI and Docker v2s2);
# podman pulls it back into empty storage; digests, image ID and file content
# must match. podman then pushes it again under another name.
# All storage is private (vfs driver, --root/--runroot in a temp dir).
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
need buildah podman

make_tmpdir WORK
export TMPDIR=$WORK/tmp   # containers/image stages blobs here (default /var/tmp)
mkdir -p "$TMPDIR"
start_registry

BUILDAH=(buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs)
PODMAN=(podman --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs
        --tmpdir "$WORK/podman-tmp" --cgroup-manager cgroupfs --events-backend file)
# podman always creates /run/containers/networks (netavark's run dir): remove
# it afterwards if empty and not there before
[[ -e /run/containers ]] || add_cleanup "rmdir /run/containers/networks /run/containers 2>/dev/null"
# remove containers/images left in the private storage (vfs: nothing is mounted)
add_cleanup "${BUILDAH[*]} rm --all >/dev/null 2>&1; ${PODMAN[*]} rmi --all --force >/dev/null 2>&1"

log "buildah: build an image from scratch"
head -c 100000 /dev/urandom >"$WORK/payload.bin"
echo "berth e2e $(date +%s%N)" >"$WORK/hello.txt"
ctr=$("${BUILDAH[@]}" from scratch)
"${BUILDAH[@]}" copy "$ctr" "$WORK/payload.bin" "$WORK/hello.txt" /data/ >/dev/null
"${BUILDAH[@]}" config --cmd /data/hello.txt --label berth.e2e=true "$ctr"
image_id=$("${BUILDAH[@]}" commit --quiet "$ctr" localhost/e2e/built:v1)
"${BUILDAH[@]}" rm "$ctr" >/dev/null
log "built image $image_id"

for fmt in oci v2s2; do
    ref=$REGISTRY/e2e/buildah:$fmt
    log "buildah push --format $fmt -> $ref"
    "${BUILDAH[@]}" push --quiet --tls-verify=false --format "$fmt" --digestfile "$WORK/pushed-$fmt" \
        localhost/e2e/built:v1 "docker://$ref"
    pushed=$(cat "$WORK/pushed-$fmt")
    assert_eq "$pushed" "$(manifest_digest e2e/buildah "$fmt")" "registry digest of $ref"
    want_type=application/vnd.oci.image.manifest.v1+json
    [[ $fmt == v2s2 ]] && want_type=application/vnd.docker.distribution.manifest.v2+json
    assert_eq "$want_type" "$(get_manifest e2e/buildah "$fmt" | jq -r .mediaType)" "manifest mediaType ($fmt)"

    log "remove the local image, then podman pull $ref"
    "${PODMAN[@]}" rmi --all --force >/dev/null
    if "${PODMAN[@]}" image exists localhost/e2e/built:v1; then fail "local image still present after rmi"; fi
    "${PODMAN[@]}" pull --quiet --tls-verify=false "$ref" >/dev/null
    inspect=$("${PODMAN[@]}" image inspect "$ref")
    assert_eq "$pushed" "$(jq -r '.[0].Digest' <<<"$inspect")" "podman image digest ($fmt)"
    assert_eq "$image_id" "$(jq -r '.[0].Id' <<<"$inspect")" "podman image ID ($fmt)"
    assert_eq "$REGISTRY/e2e/buildah@$pushed" "$(jq -r '.[0].RepoDigests[0]' <<<"$inspect")" "podman RepoDigests ($fmt)"

    mnt=$("${PODMAN[@]}" image mount "$ref")
    cmp "$WORK/payload.bin" "$mnt/data/payload.bin" || fail "payload.bin differs after pull ($fmt)"
    cmp "$WORK/hello.txt" "$mnt/data/hello.txt" || fail "hello.txt differs after pull ($fmt)"
    log "ok: file contents equal after pull ($fmt)"
    "${PODMAN[@]}" image unmount "$ref" >/dev/null
    # re-tag for the next round so buildah push finds it
    "${PODMAN[@]}" tag "$ref" localhost/e2e/built:v1
done

log "podman push to another repository"
"${PODMAN[@]}" push --quiet --tls-verify=false --digestfile "$WORK/pushed-podman" \
    localhost/e2e/built:v1 "docker://$REGISTRY/e2e/podman:v1"
assert_eq "$(cat "$WORK/pushed-podman")" "$(manifest_digest e2e/podman v1)" "registry digest of e2e/podman:v1"
tags=$(curl -sf "$REGISTRY_URL/v2/e2e/buildah/tags/list" | jq -r '.tags | sort | join(",")')
assert_eq "oci,v2s2" "$tags" "tags of e2e/buildah"
log "podman/buildah checks passed"
