"""Running a data set: push, list, pull, referrers and delete, as the rewritten official suite does.

The rewritten official suite pushes a series of data sets into one repository, one after the
other. For each it pushes the blobs, the manifests by digest and then the tags (manifest PUTs
with Transfer-Encoding: chunked, as Go sends them), lists the tags, HEADs and GETs every tag,
manifest and blob, lists the referrers of every subject (also filtered by each artifactType),
and deletes it all again: tags, manifests newest first, blobs. A delete answered 400 or 405
means deletion is disabled, which the official suite tolerates; any other delete must be 202
(or 404) and a HEAD must then give 404.
"""

import json

from .blob_uploads import expect_blob_dcd
from .client import ACCEPT_OCI, blobs, location, manifests, oci_tags
from .expect import Failure, error_codes, expect, expect_status
from .media_types import OCI_INDEX, OCI_MANIFEST


def expect_manifest_response(resp, manifest, what):
    """GET or HEAD of a manifest: 200, its media type, Content-Length, the exact bytes (GET) or
    no body (HEAD), and a Docker-Content-Digest, if any, equal to its digest."""
    expect(resp.status == 200, f"{what}: {resp.method} {resp.path}: expected 200, got {resp.summary()}")
    expect(resp.header("Content-Type") == manifest.media_type,
           f"{what}: {resp.method} Content-Type {resp.header('Content-Type')!r}, want {manifest.media_type}")
    expect(resp.header("Content-Length") == str(manifest.size),
           f"{what}: {resp.method} Content-Length {resp.header('Content-Length')}, manifest size {manifest.size}")
    expect(resp.body == (manifest.data if resp.method == "GET" else b""),
           f"{what}: {resp.method} body differs from the manifest pushed")
    dcd = resp.header("Docker-Content-Digest")
    expect(dcd in (None, manifest.digest), f"{what}: Docker-Content-Digest {dcd}, want {manifest.digest}")


def expect_manifest_put(s, resp, manifest, what):
    """A manifest PUT: 201, OCI-Subject for a manifest with a subject, a Docker-Content-Digest (if
    any) equal to its digest, and a Location serving it."""
    expect(resp.status == 201, f"{what}: PUT {resp.path}: expected 201, got {resp.summary()}")
    subject = (json.loads(manifest.data).get("subject") or {}).get("digest")
    if subject:
        expect(resp.header("OCI-Subject") == subject,
               f"{what}: OCI-Subject is {resp.header('OCI-Subject')!r}, want {subject}")
    dcd = resp.header("Docker-Content-Digest")
    expect(dcd in (None, manifest.digest), f"{what}: Docker-Content-Digest {dcd}, want {manifest.digest}")
    expect_manifest_response(s.get(location(resp), headers=ACCEPT_OCI), manifest, f"{what}: its Location")


def data_push(s, repo, ds):
    for blob in ds.blobs.values():
        s.upload_blob(repo, blob)
    pushed = set()
    for manifest in ds.manifests:
        what = f"PUT by digest {manifest.digest[:19]}…"
        if manifest is ds.bad_digest:
            resp = s.put_manifest(repo, manifest.digest, manifest, chunked=True)
            expect(resp.status == 400, f"{what} with bytes not matching the digest: expected 400, got {resp.summary()}")
            error_codes(resp)
            continue
        tags = [t for t, m in ds.tags.items() if m is manifest] if ds.tag_param else []
        resp = s.put_manifest(repo, manifest.digest, manifest, params=[("tag", t) for t in tags] or None,
                              chunked=True)
        expect_manifest_put(s, resp, manifest, what)
        missing = set(tags) - oci_tags(resp)
        expect(not missing, f"{what}?tag=…: OCI-Tag {resp.header('OCI-Tag')!r} lacks {sorted(missing)}")
        pushed.update(tags)
    for tag, manifest in ds.tags.items():
        if tag not in pushed:
            expect_manifest_put(s, s.put_manifest(repo, tag, manifest, chunked=True), manifest, f"PUT tag {tag}")


def data_list(s, repo, ds):
    resp = s.get(f"/v2/{repo}/tags/list")
    expect(resp.status in (200, 404) and (resp.status == 404 or isinstance(resp.json(), dict)),
           f"GET /tags/list: expected 200 with a tag list, or 404; got {resp.summary()}")
    tags = (resp.json().get("tags") or []) if resp.status == 200 else []
    missing = sorted(set(ds.tags) - set(tags))
    expect(not missing, f"tags {missing} are not listed")
    if len(tags) >= 2:
        ordered = sorted(tags)
        end = len(ordered) // 2
        _, after = s.tags(repo, last=ordered[end - 1])
        expect(not set(ordered[:end]) & set(after) and set(ordered[end:]) <= set(after),
               f"?last={ordered[end - 1]} listed {after}, want {ordered[end:]}")


def data_pull(s, repo, ds):
    refs = [(tag, m) for tag, m in ds.tags.items()] + [(m.digest, m) for m in ds.manifests]
    for ref, manifest in refs:
        if manifest is ds.bad_digest:
            continue
        expect_manifest_response(s.head(manifests(repo, ref), headers=ACCEPT_OCI), manifest, f"HEAD {ref}")
        expect_manifest_response(s.get(manifests(repo, ref), headers=ACCEPT_OCI), manifest, f"GET {ref}")
    for blob in ds.blobs.values():
        for resp in (s.head(blobs(repo, blob.digest)), s.get(blobs(repo, blob.digest))):
            expect_status(resp, 200)
            expect(resp.header("Content-Length") == str(blob.size),
                   f"{resp.method} {resp.path}: Content-Length {resp.header('Content-Length')}, blob size {blob.size}")
            expect(resp.body == (blob.data if resp.method == "GET" else b""), f"{resp.method} {resp.path}: body differs")
            expect_blob_dcd(resp, blob)
    for desc in ds.absent:  # never pushed: the registry must not claim to have it
        path = (manifests if desc["mediaType"] in (OCI_MANIFEST, OCI_INDEX) else blobs)(repo, desc["digest"])
        expect_status(s.get(path, headers=ACCEPT_OCI), 404)


def same_referrer(got, want):
    return (all(got.get(k) == want.get(k) for k in ("mediaType", "digest", "size", "artifactType"))
            and all((got.get("annotations") or {}).get(k) == v for k, v in (want.get("annotations") or {}).items()))


def data_referrers(s, repo, ds):
    for subject, wanted in ds.referrers.items():
        resp, listed = s.referrers(repo, subject)
        doc = resp.json()
        expect(resp.header("Content-Type") == OCI_INDEX and doc.get("schemaVersion") == 2
               and doc.get("mediaType") == OCI_INDEX, f"referrers of {subject[:19]}… is not an OCI image index")
        for want in wanted:
            expect(any(same_referrer(d, want) for d in listed),
                   f"referrers of {subject[:19]}… lack {want['digest'][:19]}… (artifactType "
                   f"{want.get('artifactType')}); listed {[(d.get('digest', '')[:19], d.get('artifactType')) for d in listed]}")
        for artifact_type in {w.get("artifactType") for w in wanted} - {None}:
            resp, listed = s.referrers(repo, subject, artifactType=artifact_type)
            applied = "artifactType" in {f.strip() for f in (resp.header("OCI-Filters-Applied") or "").split(",")}
            for want in wanted:
                if not applied or want.get("artifactType") == artifact_type:
                    expect(any(same_referrer(d, want) for d in listed),
                           f"?artifactType={artifact_type} lacks {want['digest'][:19]}…")
            if applied:
                other = [d.get("artifactType") for d in listed if d.get("artifactType") != artifact_type]
                expect(not other, f"?artifactType={artifact_type} also lists artifactTypes {other}")


def data_delete(s, repo, ds):
    def deleted(path):
        resp = s.delete(path)
        if resp.status in (400, 405):
            return False  # deletion disabled
        expect(resp.status in (202, 404), f"DELETE {resp.path}: expected 202 (or 404), got {resp.summary()}")
        return True

    for tag in ds.tags:
        if deleted(manifests(repo, tag)):
            expect_status(s.head(manifests(repo, tag)), 404)
    for manifest in reversed(ds.manifests):
        if deleted(manifests(repo, manifest.digest)):
            expect_status(s.head(manifests(repo, manifest.digest)), 404)
    for blob in ds.blobs.values():
        if deleted(blobs(repo, blob.digest)):
            expect_status(s.head(blobs(repo, blob.digest)), 404)


def run_data_set(s, ds):
    """Every data set goes to the same repository, in turn, as in the official suite."""
    repo = s.repo("data")
    for phase, step in (("push", data_push), ("list", data_list), ("pull", data_pull),
                        ("referrers", data_referrers), ("delete", data_delete)):
        try:
            step(s, repo, ds)
        except Failure as err:
            raise Failure(f"{phase}: {err}") from None
