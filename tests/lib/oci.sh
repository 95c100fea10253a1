# shellcheck shell=bash
# Build OCI image layouts by hand (no network, no container tools needed).
#
#   oci_make_image DIR TAG [ARCH]          image manifest with 2 random gzip layers
#   oci_make_index DIR TAG ARCH1 ARCH2...  image index with one manifest per ARCH
#
# Both print the digest of what TAG points at. The layout's index.json names
# it with the annotation org.opencontainers.image.ref.name=TAG.
# Needs: tar, gzip, sha256sum, jq.

# oci_init DIR : create an empty layout (idempotent).
oci_init() {
    mkdir -p "$1/blobs/sha256"
    [[ -f $1/oci-layout ]] || printf '{"imageLayoutVersion":"1.0.0"}' >"$1/oci-layout"
    [[ -f $1/index.json ]] || printf '{"schemaVersion":2,"manifests":[]}' >"$1/index.json"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
size_of() { stat -c %s "$1"; }

# oci_add_blob DIR FILE : move FILE into the layout; print "sha256:HEX SIZE".
oci_add_blob() {
    local hex size
    hex=$(sha256_of "$2")
    size=$(size_of "$2")
    mv -f "$2" "$1/blobs/sha256/$hex"
    echo "sha256:$hex $size"
}

# oci_blob_path DIR DIGEST
oci_blob_path() { echo "$1/blobs/sha256/${2#sha256:}"; }

# oci_make_layer DIR : a gzip'd tar of a few random files;
# print "DIGEST SIZE DIFF_ID".
oci_make_layer() {
    local dir=$1 src tarf diffid i
    src=$(mktemp -d)
    mkdir -p "$src/e2e"
    for i in 1 2 3; do
        head -c $((1024 + RANDOM)) /dev/urandom >"$src/e2e/file$i.bin"
    done
    date +%s%N >"$src/e2e/stamp.txt"
    tarf=$(mktemp)
    tar -C "$src" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$tarf" e2e
    diffid=sha256:$(sha256_of "$tarf")
    gzip -n -c "$tarf" >"$tarf.gz"
    rm -rf "$src" "$tarf"
    echo "$(oci_add_blob "$dir" "$tarf.gz") $diffid"
}

# oci_make_manifest DIR ARCH : write config + 2 layers + manifest blobs;
# print "DIGEST SIZE" of the manifest (not added to index.json).
oci_make_manifest() {
    local dir=$1 arch=${2:-amd64} l1 l2 cfg tmp
    oci_init "$dir"
    read -r -a l1 <<<"$(oci_make_layer "$dir")"
    read -r -a l2 <<<"$(oci_make_layer "$dir")"
    tmp=$(mktemp)
    jq -cn --arg arch "$arch" --arg d1 "${l1[2]}" --arg d2 "${l2[2]}" '{
        created: "2024-01-01T00:00:00Z", architecture: $arch, os: "linux",
        config: {Cmd: ["/e2e/stamp.txt"], Labels: {"berth.e2e": "true"}},
        rootfs: {type: "layers", diff_ids: [$d1, $d2]},
        history: [{created: "2024-01-01T00:00:00Z", created_by: "berth e2e layer 1"},
                  {created: "2024-01-01T00:00:00Z", created_by: "berth e2e layer 2"}]
    }' >"$tmp"
    read -r -a cfg <<<"$(oci_add_blob "$dir" "$tmp")"
    tmp=$(mktemp)
    jq -cn --arg cd "${cfg[0]}" --argjson cs "${cfg[1]}" \
        --arg d1 "${l1[0]}" --argjson s1 "${l1[1]}" --arg d2 "${l2[0]}" --argjson s2 "${l2[1]}" '{
        schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
        layers: [
            {mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $d1, size: $s1},
            {mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $d2, size: $s2}]
    }' >"$tmp"
    oci_add_blob "$dir" "$tmp"
}

# oci_tag DIR MEDIATYPE DIGEST SIZE TAG [PLATFORM_JSON] : point TAG at a blob in index.json.
oci_tag() {
    local dir=$1 tmp
    tmp=$(mktemp)
    jq -c --arg mt "$2" --arg d "$3" --argjson s "$4" --arg tag "$5" '
        .manifests = [.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] != $tag)]
                     + [{mediaType: $mt, digest: $d, size: $s,
                         annotations: {"org.opencontainers.image.ref.name": $tag}}]' \
        "$dir/index.json" >"$tmp"
    mv "$tmp" "$dir/index.json"
}

# oci_make_image DIR TAG [ARCH] : print the manifest digest.
oci_make_image() {
    local m
    read -r -a m <<<"$(oci_make_manifest "$1" "${3:-amd64}")"
    oci_tag "$1" application/vnd.oci.image.manifest.v1+json "${m[0]}" "${m[1]}" "$2"
    echo "${m[0]}"
}

# oci_make_index DIR TAG ARCH... : print the index digest.
oci_make_index() {
    local dir=$1 tag=$2 arch m entries='[]' tmp idx
    shift 2
    for arch in "$@"; do
        read -r -a m <<<"$(oci_make_manifest "$dir" "$arch")"
        entries=$(jq -c --arg d "${m[0]}" --argjson s "${m[1]}" --arg arch "$arch" \
            '. + [{mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $d, size: $s,
                   platform: {architecture: $arch, os: "linux"}}]' <<<"$entries")
    done
    tmp=$(mktemp)
    jq -cn --argjson m "$entries" \
        '{schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: $m}' >"$tmp"
    read -r -a idx <<<"$(oci_add_blob "$dir" "$tmp")"
    oci_tag "$dir" application/vnd.oci.image.index.v1+json "${idx[0]}" "${idx[1]}" "$tag"
    echo "${idx[0]}"
}

# oci_ref_digest DIR TAG : digest that index.json gives for TAG.
oci_ref_digest() {
    jq -r --arg tag "$2" \
        '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] == $tag) | .digest' \
        "$1/index.json"
}

# oci_manifest_blobs DIR DIGEST : print config and layer digests of an image manifest.
oci_manifest_blobs() {
    jq -r '.config.digest, .layers[].digest' "$(oci_blob_path "$1" "$2")"
}

# oci_tar DIR TARFILE : pack a layout as an OCI archive (for docker load / ctr import).
oci_tar() { tar -C "$1" -cf "$2" oci-layout index.json blobs; }

# oci_docker_archive DIR TAG REPO:TAG OUT : pack the image TAG of a layout as a
# "docker save" archive (manifest.json + the layout's blobs) for docker load.
oci_docker_archive() {
    local dir=$1 m
    m=$(oci_blob_path "$dir" "$(oci_ref_digest "$dir" "$2")")
    jq -c --arg rt "$3" '[{Config: ("blobs/sha256/" + (.config.digest | ltrimstr("sha256:"))),
        RepoTags: [$rt],
        Layers: [.layers[].digest | "blobs/sha256/" + ltrimstr("sha256:")]}]' "$m" >"$dir/manifest.json"
    tar -C "$dir" -cf "$4" manifest.json blobs
    rm -f "$dir/manifest.json"
}
