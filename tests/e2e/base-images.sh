#!/usr/bin/env bash
# Approved base images (a policy's base_images, docs/policies.md) with buildah: images built
# FROM berth's base/debian:bookworm push to tools/**; one built on another base is refused
# naming the layer where it diverges; one built on an older, no longer tagged version of the
# base is accepted; the lineage query (HTTP and `berth lineage`) lists what is built on the
# base, marking what is on the old version.
set -euo pipefail
. "$(dirname "$0")/../lib/registry.sh"
need buildah jq curl
[[ -n ${BERTH_BIN:-} ]] || skip "needs BERTH_BIN (berth's policies)"

make_tmpdir WORK
export TMPDIR=$WORK/tmp   # containers/image stages blobs here (default /var/tmp)
mkdir -p "$TMPDIR"
cat >"$WORK/berth.json" <<EOF
{"policies": [{"name": "approved-bases", "repositories": ["tools/**"],
               "base_images": ["base/debian:bookworm*", "base/python:3.*"]}]}
EOF
BERTH_CONFIG=$WORK/berth.json start_registry

BUILDAH=(buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs)
add_cleanup "${BUILDAH[*]} rm --all >/dev/null 2>&1; ${BUILDAH[*]} rmi --all --force >/dev/null 2>&1"

# build FROM TAG-OR-SCRATCH NAME : an image with one new layer (a file of its own), committed as NAME
build() {
    local from=$1 name=$2 ctr
    [[ $from == scratch ]] || from=docker://$REGISTRY/$from
    ctr=$("${BUILDAH[@]}" from --quiet --tls-verify=false "$from")
    echo "$name $(date +%s%N) $RANDOM" >"$WORK/file"
    "${BUILDAH[@]}" copy "$ctr" "$WORK/file" "/$(tr '/:' '__' <<<"$name")" >/dev/null
    "${BUILDAH[@]}" commit --quiet "$ctr" "localhost/$name" >/dev/null
    "${BUILDAH[@]}" rm "$ctr" >/dev/null
}
# push NAME REF : buildah push to berth; prints the digest, or fails with buildah's output in $WORK/push.err
push() {
    "${BUILDAH[@]}" push --quiet --tls-verify=false --digestfile "$WORK/digest" "localhost/$1" \
        "docker://$REGISTRY/$2" 2>"$WORK/push.err" && cat "$WORK/digest"
}

log "the base, built from scratch: base/debian:bookworm (old), then another: other/base:1"
build scratch base-old
old=$(push base-old base/debian:bookworm)
build scratch stranger
push stranger other/base:1 >/dev/null

log "tools/x FROM base/debian:bookworm: accepted"
build base/debian:bookworm tools-x
x=$(push tools-x tools/x:1) || { cat "$WORK/push.err"; fail "a build on the approved base was refused"; }
layers=$(curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "$REGISTRY_URL/v2/tools/x/manifests/1" | jq '.layers | length')
assert_eq 2 "$layers" "tools/x: the base's layer and its own"

log "tools/y FROM other/base:1: refused, naming the policy and the layer"
build other/base:1 tools-y
if push tools-y tools/y:1 >/dev/null; then fail "a build on an unapproved base was accepted"; fi
grep -q "approved-bases" "$WORK/push.err" || { cat "$WORK/push.err"; fail "the refusal names no policy"; }
grep -q "layer 1 (sha256:" "$WORK/push.err" || { cat "$WORK/push.err"; fail "the refusal names no layer"; }
code=$(curl -s -o /dev/null -w '%{http_code}' "$REGISTRY_URL/v2/tools/y/manifests/1")
assert_eq 404 "$code" "the refused push stored nothing"

log "the base moves on: base/debian:bookworm is a new build; the old one is untagged"
build scratch base-new
new=$(push base-new base/debian:bookworm)
assert_ne "$old" "$new" "the base's digest"

log "tools/z FROM the old base by digest: accepted (it was once base/debian:bookworm)"
build "base/debian@$old" tools-z
z=$(push tools-z tools/z:1) || { cat "$WORK/push.err"; fail "a build on an older version of the base was refused"; }
log "tools/w FROM the new base: accepted"
build base/debian:bookworm tools-w
w=$(push tools-w tools/w:1) || { cat "$WORK/push.err"; fail "a build on the current base was refused"; }

log "lineage: every image built on base/debian:bookworm, marking the old version"
answer=$(curl -sf "$REGISTRY_URL/_berth/v1/lineage?repository=base/debian&reference=bookworm")
assert_eq "$new" "$(jq -r .base.digest <<<"$answer")" "base digest"
assert_eq "$old,$new" "$(jq -r '.base.versions | join(",")' <<<"$answer")" "base versions, oldest first"
summary=$(jq -r '.derived | sort_by(.repository) | map("\(.repository):\(.tags | join("+")):\(.current)") | join(" ")' <<<"$answer")
assert_eq "tools/w:1:true tools/x:1:false tools/z:1:false" "$summary" "derived images"
assert_eq "$old" "$(jq -r '.derived[] | select(.repository == "tools/x") | .base_digest' <<<"$answer")" "tools/x's base"
assert_eq "$x $z $w" "$(jq -r '[(.derived[] | select(.repository == "tools/x")), (.derived[] | select(.repository == "tools/z")), (.derived[] | select(.repository == "tools/w"))] | map(.digest) | join(" ")' <<<"$answer")" "derived digests"

log "lineage paged: n=1 three times"
page=$(curl -sf -D "$WORK/headers" "$REGISTRY_URL/_berth/v1/lineage?repository=base/debian&reference=bookworm&n=1")
seen=$(jq -r '.derived[0].repository' <<<"$page")
for _ in 1 2; do
    next=$(jq -r .next <<<"$page")
    [[ $next != null ]] || fail "a page of one of three says nothing follows"
    grep -qi '^link: <' "$WORK/headers" || fail "no Link header on a page that has a next"
    page=$(curl -sf -D "$WORK/headers" "$REGISTRY_URL$next")
    seen="$seen $(jq -r '.derived[0].repository' <<<"$page")"
done
assert_eq "tools/w tools/x tools/z" "$(tr ' ' '\n' <<<"$seen" | sort | xargs)" "pages"

log "berth lineage --root, beside the running server"
cli=$("$BERTH_BIN" lineage --root "$REGISTRY_DIR/root" base/debian:bookworm)
grep -q "^tools/x@$x \[1\] on $old (older)$" <<<"$cli" || { echo "$cli"; fail "berth lineage: tools/x"; }
grep -q "^tools/w@$w \[1\] on $new (current)$" <<<"$cli" || { echo "$cli"; fail "berth lineage: tools/w"; }
assert_eq 3 "$("$BERTH_BIN" lineage --root "$REGISTRY_DIR/root" --json base/debian:bookworm | jq '.derived | length')" \
    "berth lineage --json"
log "base image checks passed"
