#!/usr/bin/env bash
# berth's container image, end to end (opt-in, slow: BERTH_IMAGE_TEST=1).
#
#   BERTH_IMAGE_TEST=1 tests/image/run.sh
#
# 1. debian:bookworm (and -slim, the same image) made offline-base style:
#    debootstrap --variant=minbase from the machine's Debian mirror, imported
#    into a private dockerd (private containerd, vfs, temp dirs). The rootfs
#    tarball is cached in ${XDG_CACHE_HOME:-~/.cache}/berth-image-test/.
# 2. docker build -f docker/Dockerfile (BuildKit: the Dockerfile has a cache
#    mount) from the repository root; the context must be what
#    docker/Dockerfile.dockerignore lets through, and the image runs `berth version`.
# 3. Three replicas from the image (docker run --network host, read-only root,
#    no capabilities, a volume each, one peer secret): an image pushed with
#    skopeo to replica 1 shows up on replica 3.
# 4. A node agent from the same image in front of the three: a pull through it
#    (skopeo) gives the same digests and bytes, and ?ns=HOST selects the
#    repository HOST/NAME on the replicas.
#
# Exit status: 0 pass, 1 fail, 77 skip (not opted in, or a tool is missing).
# Needs root, network access to the Debian archive (debootstrap and the
# Dockerfile's apt-get), and Debian's debootstrap docker.io containerd runc skopeo.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
# shellcheck source=../lib/registry.sh
. "$HERE/../lib/registry.sh"
# shellcheck source=../lib/oci.sh
. "$HERE/../lib/oci.sh"
# shellcheck source=../lib/containerd.sh
. "$HERE/../lib/containerd.sh"

[[ ${BERTH_IMAGE_TEST:-} == 1 ]] || skip "opt-in: set BERTH_IMAGE_TEST=1 (builds the image, takes long)"
need debootstrap dockerd docker containerd ctr runc skopeo
((EUID == 0)) || skip "needs root (debootstrap, dockerd)"

# start_registry (the private dockerd wants one for --insecure-registry):
# the berth next to this checkout unless told otherwise.
if [[ -z ${BERTH_BIN:-} && -z ${REGISTRY_IMPL:-} ]]; then
    if [[ -x $SRC/build/berth ]]; then BERTH_BIN=$SRC/build/berth; else REGISTRY_IMPL=distribution; fi
fi

SUITE=bookworm
ARCH=$(dpkg --print-architecture)
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/berth-image-test
ROOTFS_TAR=$CACHE/debian-$SUITE-minbase-$ARCH.tar
IMAGE=berth:test

make_tmpdir WORK

# ---------------------------------------------------------------- helpers

# debian_mirror : the first Debian archive the machine's apt sources name for
# $SUITE (one-line .list and deb822 .sources files), else deb.debian.org.
debian_mirror() {
    local f m=""
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -r $f ]] || continue
        m=$(awk -v s="$SUITE" '$1 == "deb" {
                i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == s) { print $i; exit } }' "$f")
        [[ -n $m ]] && break
    done
    if [[ -z $m ]]; then
        for f in /etc/apt/sources.list.d/*.sources; do
            [[ -r $f ]] || continue
            m=$(awk -v s="$SUITE" '
                function flush() { if (deb && suite && uri != "" && enabled) { print uri; found = 1; exit } }
                BEGIN { RS = ""; FS = "\n" }
                { deb = 0; suite = 0; uri = ""; enabled = 1
                  for (i = 1; i <= NF; i++) {
                      if ($i ~ /^#/) continue
                      split($i, kv, ":"); k = tolower(kv[1]); v = substr($i, index($i, ":") + 1)
                      n = split(v, w, /[ \t]+/)
                      for (j = 1; j <= n; j++) {
                          if (w[j] == "") continue
                          if (k == "types" && w[j] == "deb") deb = 1
                          if (k == "suites" && w[j] == s) suite = 1
                          if (k == "uris" && uri == "") uri = w[j]
                          if (k == "enabled" && tolower(w[j]) == "no") enabled = 0
                      }
                  }
                  flush() }' "$f")
            [[ -n $m ]] && break
        done
    fi
    echo "${m:-http://deb.debian.org/debian}"
}

# debian_rootfs : the cached minbase rootfs tarball, made on first use.
debian_rootfs() {
    if [[ -s $ROOTFS_TAR ]]; then
        log "debian:$SUITE rootfs from the cache: $ROOTFS_TAR ($(du -h "$ROOTFS_TAR" | cut -f1))"
        return 0
    fi
    local mirror dir t0=$SECONDS
    mirror=$(debian_mirror)
    dir=$WORK/rootfs
    log "debootstrap --variant=minbase $SUITE from $mirror (first run only)"
    if ! debootstrap --variant=minbase --arch="$ARCH" "$SUITE" "$dir" "$mirror" >"$WORK/debootstrap.log" 2>&1; then
        tail -n 30 "$WORK/debootstrap.log" >&2
        [[ -f $dir/debootstrap/debootstrap.log ]] && tail -n 30 "$dir/debootstrap/debootstrap.log" >&2
        fail "debootstrap failed (log above)"
    fi
    # what the official image drops too: apt lists and downloaded .debs
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/archives/*.deb
    mkdir -p "$CACHE"
    tar -C "$dir" --numeric-owner -cf "$ROOTFS_TAR.tmp.$$" .
    mv -f "$ROOTFS_TAR.tmp.$$" "$ROOTFS_TAR"
    remove_tree "$dir"
    log "debootstrap done in $((SECONDS - t0))s: $ROOTFS_TAR ($(du -h "$ROOTFS_TAR" | cut -f1))"
}

# A docker client that speaks BuildKit to the daemon: the one on PATH if it
# has the buildx plugin, or a client from before 23.0 (Debian 12's docker.io,
# /usr/bin/docker), which has BuildKit built in. Docker 23+ without buildx can
# only use the legacy builder, which refuses RUN --mount.
buildkit_client() {
    local c v
    for c in "$(command -v docker)" /usr/bin/docker /usr/local/bin/docker; do
        [[ -x $c ]] || continue
        if DOCKER_CONFIG=$DOCKER_CONFIG "$c" buildx version >/dev/null 2>&1; then echo "$c"; return 0; fi
        v=$("$c" version --format '{{.Client.Version}}' 2>/dev/null || true)
        if [[ $v =~ ^([0-9]+)\. ]] && ((BASH_REMATCH[1] < 23)); then echo "$c"; return 0; fi
    done
    return 1
}

http_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }

container_running() { [[ $("${DOCKER[@]}" inspect -f '{{.State.Running}}' "$1" 2>/dev/null) == true ]]; }

# wait_http NAME URL CODE TIMEOUT : poll URL until it answers CODE; fail early
# (with the container's log) if container NAME stops.
wait_http() {
    local name=$1 url=$2 code=$3 deadline=$((SECONDS + $4)) got
    while :; do
        got=$(http_code "$url" || true)
        [[ $got == "$code" ]] && return 0
        if ! container_running "$name"; then
            "${DOCKER[@]}" logs --tail 30 "$name" >&2 || true
            fail "container $name exited ($("${DOCKER[@]}" inspect -f '{{.State.ExitCode}}' "$name" 2>/dev/null)) before $url answered $code"
        fi
        ((SECONDS < deadline)) || {
            "${DOCKER[@]}" logs --tail 30 "$name" >&2 || true
            fail "$url answered '$got', not $code, within $4 s"
        }
        sleep 0.2
    done
}

CONTAINERS=()
_dump_containers() {
    local c
    if [[ ${rc:-0} != 0 && ${rc:-0} != 77 ]]; then
        for c in "${CONTAINERS[@]}"; do
            printf -- '----- last lines of container %s -----\n' "$c" >&2
            "${DOCKER[@]}" logs --tail 30 "$c" 2>&1 | sed 's/^/  /' >&2
        done
    fi
    for c in "${CONTAINERS[@]}"; do "${DOCKER[@]}" rm -f -v "$c" >/dev/null 2>&1; done
}

# run_berth NAME CONFIG_FILE [docker run options...] : a berth container from
# the image, hardened as docker/README.md suggests, with its own volume.
run_berth() {
    local name=$1 config=$2
    shift 2
    CONTAINERS+=("$name")
    "${DOCKER[@]}" run -d --name "$name" --network host \
        --read-only --cap-drop ALL --security-opt no-new-privileges \
        -v "$name-data:/var/lib/berth" \
        -v "$config:/etc/berth/config.json:ro" \
        "$@" "$IMAGE" >/dev/null
}

# manifest_sha URL : sha256 of the manifest bytes served at URL.
manifest_sha() {
    curl -sf -H "Accept: $MANIFEST_ACCEPT" "$1" | sha256sum | cut -d' ' -f1 | sed 's/^/sha256:/'
}

has_manifest() { [[ $(http_code -H "Accept: $MANIFEST_ACCEPT" "$1") == 200 ]]; }

# ---------------------------------------------------------------- daemons and base images

debian_rootfs

start_registry
start_containerd
start_dockerd
add_cleanup _dump_containers

log "docker import: debian:$SUITE and debian:$SUITE-slim"
"${DOCKER[@]}" import --change 'CMD ["bash"]' "$ROOTFS_TAR" "debian:$SUITE" >/dev/null
"${DOCKER[@]}" tag "debian:$SUITE" "debian:$SUITE-slim"
# shellcheck disable=SC2016  # expanded in the container
assert_eq "$SUITE" "$("${DOCKER[@]}" run --rm --network host "debian:$SUITE" sh -c '. /etc/os-release; echo $VERSION_CODENAME')" \
    "VERSION_CODENAME in the imported base"

BUILD_CLIENT=$(buildkit_client) ||
    fail "no docker client with BuildKit: docker on PATH has no buildx plugin and is 23.0 or newer (install Debian's docker.io for /usr/bin/docker)"
BUILD_DOCKER=(env DOCKER_BUILDKIT=1 "$BUILD_CLIENT" -H "unix://$DOCKER_HOST_SOCK")
log "BuildKit client: $BUILD_CLIENT ($("${BUILD_DOCKER[@]}" version --format '{{.Client.Version}}'))"

# ---------------------------------------------------------------- the build context

# A probe build with the same ignore file (same naming: <Dockerfile>.dockerignore
# next to the Dockerfile) lists what the daemon gets as context.
log "build context through docker/Dockerfile.dockerignore"
mkdir -p "$WORK/probe"
cp "$SRC/docker/Dockerfile.dockerignore" "$WORK/probe/Dockerfile.dockerignore"
printf 'FROM debian:%s\nCOPY . /ctx\n' "$SUITE" >"$WORK/probe/Dockerfile"
"${BUILD_DOCKER[@]}" build --progress=plain --network host -f "$WORK/probe/Dockerfile" -t berth-context-probe "$SRC" \
    >"$WORK/probe.log" 2>&1 || { tail -n 30 "$WORK/probe.log" >&2; fail "context probe build failed"; }
"${DOCKER[@]}" run --rm --network host berth-context-probe sh -c 'cd /ctx && find . -maxdepth 2 | sort' >"$WORK/context.txt"
ctx_top=$(awk -F/ 'NF == 2 { print $2 }' "$WORK/context.txt" | LC_ALL=C sort | tr '\n' ' ')
assert_eq ".ci CMakeLists.txt bench docker include src " "$ctx_top" "top level of the build context"
assert_eq "config.json runtime-packages.sh " "$(awk -F/ '$2 == "docker" && NF == 3 { print $3 }' "$WORK/context.txt" | LC_ALL=C sort | tr '\n' ' ')" \
    "docker/ in the build context"
"${DOCKER[@]}" rmi berth-context-probe >/dev/null

# ---------------------------------------------------------------- the image

log "docker build -f docker/Dockerfile -t $IMAGE . (BuildKit, --network host)"
t0=$SECONDS
(cd "$SRC" && "${BUILD_DOCKER[@]}" build --progress=plain --network host -f docker/Dockerfile -t "$IMAGE" .) \
    >"$WORK/build.log" 2>&1 || { tail -n 60 "$WORK/build.log" >&2; fail "docker build failed ($((SECONDS - t0))s)"; }
BUILD_SECONDS=$((SECONDS - t0))
log "build took ${BUILD_SECONDS}s; context: $(grep -o 'transferring context: [^ ]* [^ ]*' "$WORK/build.log" | tail -n1 || true)"
sed -n 's/^#[0-9]* [0-9.]* \(runtime packages: .*\)/\1/p' "$WORK/build.log" >&2
"${DOCKER[@]}" image ls "$IMAGE" >&2

version=$("${DOCKER[@]}" run --rm --network host --entrypoint berth "$IMAGE" version)
project_version=$(sed -n 's/^project(berth VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
assert_eq "berth $project_version" "$version" "berth version in the image"
assert_eq "65532:65532" "$("${DOCKER[@]}" image inspect -f '{{.Config.User}}' "$IMAGE")" "image user"

# ---------------------------------------------------------------- three replicas

log "three replicas from $IMAGE"
head -c 24 /dev/urandom | sha256sum | cut -d' ' -f1 >"$WORK/peer-secret"
chmod 0644 "$WORK/peer-secret"   # read by uid 65532 in the containers
SECRET=$(cat "$WORK/peer-secret")
PORTS=()
while ((${#PORTS[@]} < 4)); do
    p=$(free_port)
    [[ " ${PORTS[*]} " == *" $p "* ]] || PORTS+=("$p")
done
for i in 0 1 2; do
    peers=()
    for j in 0 1 2; do ((j == i)) || peers+=("127.0.0.1:${PORTS[j]}"); done
    jq -n --arg listen "127.0.0.1:${PORTS[i]}" --arg id "berth-$((i + 1))" \
        --argjson peers "$(printf '%s\n' "${peers[@]}" | jq -R . | jq -s .)" '{
            listen: $listen, root: "/var/lib/berth", replica_id: $id, log: {access: false},
            replication: {peers: $peers, secret_file: "/etc/berth/peer-secret",
                          write_quorum: "quorum", poll_interval_ms: 100}}' >"$WORK/replica$((i + 1)).json"
    chmod 0644 "$WORK/replica$((i + 1)).json"
    run_berth "replica$((i + 1))" "$WORK/replica$((i + 1)).json" -v "$WORK/peer-secret:/etc/berth/peer-secret:ro"
done
R=("http://127.0.0.1:${PORTS[0]}" "http://127.0.0.1:${PORTS[1]}" "http://127.0.0.1:${PORTS[2]}")
for i in 0 1 2; do wait_http "replica$((i + 1))" "${R[i]}/readyz" 200 60; done
peers_reachable() {
    local u
    for u in "${R[@]}"; do
        curl -sf -H "Berth-Peer-Secret: $SECRET" "$u/_berth/v1/status" |
            jq -e '(.peers | length) == 2 and all(.peers[]; .reachable)' >/dev/null || return 1
    done
}
wait_until 30 peers_reachable || fail "replicas do not all see each other (GET /_berth/v1/status)"
log "ok: 3 replicas ready, every peer reachable"

log "skopeo copy to replica 1, wait for it on replica 3"
REPO=image-test/hello
pushed=$(oci_make_image "$WORK/src" v1)
skopeo copy -q --dest-tls-verify=false "oci:$WORK/src:v1" "docker://127.0.0.1:${PORTS[0]}/$REPO:v1"
assert_eq "$pushed" "$(manifest_sha "${R[0]}/v2/$REPO/manifests/v1")" "digest of $REPO:v1 on replica 1"
wait_until 60 has_manifest "${R[2]}/v2/$REPO/manifests/v1" || fail "$REPO:v1 not on replica 3 within 60 s"
assert_eq "$pushed" "$(manifest_sha "${R[2]}/v2/$REPO/manifests/v1")" "digest of $REPO:v1 on replica 3"
for b in $(oci_manifest_blobs "$WORK/src" "$pushed"); do
    wait_until 30 curl -sf -o /dev/null "${R[2]}/v2/$REPO/blobs/$b" || fail "blob $b not on replica 3"
done

# The same NAME:TAG under a registry host's name, with other content, for ?ns=.
NS_HOST=mirror.example.com
ns_pushed=$(oci_make_image "$WORK/src" ns)
assert_ne "$pushed" "$ns_pushed" "the ?ns= image differs"
skopeo copy -q --dest-tls-verify=false "oci:$WORK/src:ns" "docker://127.0.0.1:${PORTS[0]}/$NS_HOST/$REPO:v1"
for i in 0 1 2; do
    wait_until 60 has_manifest "${R[i]}/v2/$NS_HOST/$REPO/manifests/v1" || fail "$NS_HOST/$REPO:v1 not on replica $((i + 1))"
done
log "ok: both images on all 3 replicas"

# ---------------------------------------------------------------- the node agent

log "node agent from $IMAGE in front of the replicas"
AGENT=http://127.0.0.1:${PORTS[3]}
jq -n --arg listen "127.0.0.1:${PORTS[3]}" --argjson replicas "$(printf '%s\n' "${R[@]}" | jq -R . | jq -s .)" '{
    listen: $listen, root: "/var/lib/berth", agent: {replicas: $replicas}, cache: {max_bytes: 1073741824}}' \
    >"$WORK/agent.json"
chmod 0644 "$WORK/agent.json"
run_berth agent "$WORK/agent.json"
wait_http agent "$AGENT/v2/" 200 60

log "skopeo copy through the agent"
skopeo copy -q --src-tls-verify=false "docker://127.0.0.1:${PORTS[3]}/$REPO:v1" "dir:$WORK/pulled"
assert_eq "$pushed" "sha256:$(sha256_of "$WORK/pulled/manifest.json")" "manifest digest pulled through the agent"
cmp "$(oci_blob_path "$WORK/src" "$pushed")" "$WORK/pulled/manifest.json" || fail "manifest bytes differ through the agent"
for b in $(oci_manifest_blobs "$WORK/src" "$pushed"); do
    cmp "$(oci_blob_path "$WORK/src" "$b")" "$WORK/pulled/${b#sha256:}" || fail "blob $b differs through the agent"
done
log "ok: $REPO:v1 through the agent, manifest and $(oci_manifest_blobs "$WORK/src" "$pushed" | wc -l) blobs byte-equal"

log "GET through the agent with ?ns=$NS_HOST"
curl -sf -H "Accept: $MANIFEST_ACCEPT" "$AGENT/v2/$REPO/manifests/v1?ns=$NS_HOST" -o "$WORK/ns-agent.json" ||
    fail "GET $AGENT/v2/$REPO/manifests/v1?ns=$NS_HOST: $(http_code -H "Accept: $MANIFEST_ACCEPT" "$AGENT/v2/$REPO/manifests/v1?ns=$NS_HOST")"
curl -sf -H "Accept: $MANIFEST_ACCEPT" "${R[2]}/v2/$NS_HOST/$REPO/manifests/v1" -o "$WORK/ns-replica.json"
assert_eq "$ns_pushed" "sha256:$(sha256_of "$WORK/ns-agent.json")" "digest of $REPO:v1?ns=$NS_HOST through the agent"
cmp "$WORK/ns-replica.json" "$WORK/ns-agent.json" || fail "?ns= bytes differ from the replica's $NS_HOST/$REPO:v1"

log "image test passed: build ${BUILD_SECONDS}s, $("${DOCKER[@]}" image ls --format '{{.Size}}' "$IMAGE")"
