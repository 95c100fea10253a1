"""readonly: the official suite's read-only mode.

The official suite's read-only mode (OCI_API_PUSH=false with OCI_RO_DATA_*): for content a
registry that refuses pushes was preloaded with, it knows only tags and digests. With --ro-*
these checks use that content (and, without --only, only base and readonly run); otherwise
they seed a fresh repository themselves and look at it the same way.
"""

import types

from ..checklist import MUST, check, fixture
from ..client import ACCEPT_OCI, blobs, manifests
from ..content import digest_matches
from ..expect import Skipped, expect, expect_status
from ..fixtures import push_artifact, push_new_image
from ..media_types import OCI_INDEX, SIGNATURE


@fixture
def readonly_content(s):
    if s.ro:
        return s.ro
    repo = s.repo("readonly")
    image = push_new_image(s, repo, "ro-tag")
    referrer, resp = push_artifact(s, repo, image.manifest, SIGNATURE)
    expect_status(resp, 201)
    return types.SimpleNamespace(repo=repo, tags=["ro-tag"], manifests=[image.manifest.digest, referrer.digest],
                                 blobs=[b.digest for b in image.blobs], referrers=[image.manifest.digest])


@check("readonly", "tags", MUST, "each read-only tag is listed by /tags/list; GET and HEAD of it return 200 (official suite)")
def readonly_tags(s):
    ro = s.need(readonly_content)
    if not ro.tags:
        raise Skipped("no --ro-tags")
    _, listed = s.tags(ro.repo)
    for tag in ro.tags:
        expect(tag in listed, f"tag {tag} is not listed")
        expect_status(s.get(manifests(ro.repo, tag), headers=ACCEPT_OCI), 200)
        head = s.head(manifests(ro.repo, tag), headers=ACCEPT_OCI)
        expect_status(head, 200)
        expect(head.body == b"", f"HEAD {tag} has a body")


@check("readonly", "manifests", MUST, "GET and HEAD of each read-only manifest digest return 200; the body hashes to "
       "it and Docker-Content-Digest, if any, equals it (official suite)")
def readonly_manifests(s):
    ro = s.need(readonly_content)
    if not ro.manifests:
        raise Skipped("no --ro-manifests")
    for digest in ro.manifests:
        got = s.get(manifests(ro.repo, digest), headers=ACCEPT_OCI)
        head = s.head(manifests(ro.repo, digest), headers=ACCEPT_OCI)
        for resp in (got, head):
            expect_status(resp, 200)
            expect(resp.header("Docker-Content-Digest") in (None, digest),
                   f"{resp.method} {digest}: Docker-Content-Digest {resp.header('Docker-Content-Digest')}")
        expect(digest_matches(digest, got.body), f"GET {digest}: the body does not hash to the digest")
        expect(head.body == b"", f"HEAD {digest} has a body")


@check("readonly", "blobs", MUST, "GET and HEAD of each read-only blob return 200; the body hashes to the digest "
       "(official suite)")
def readonly_blobs(s):
    ro = s.need(readonly_content)
    if not ro.blobs:
        raise Skipped("no --ro-blobs")
    for digest in ro.blobs:
        got, head = s.get(blobs(ro.repo, digest)), s.head(blobs(ro.repo, digest))
        expect_status(got, 200)
        expect_status(head, 200)
        expect(digest_matches(digest, got.body), f"GET {digest}: the body does not hash to the digest")
        expect(head.body == b"" and head.header("Content-Length") in (None, str(len(got.body))),
               f"HEAD {digest}: body or Content-Length {head.header('Content-Length')} wrong")


@check("readonly", "referrers", MUST, "GET /referrers of each read-only subject returns 200 with an OCI image index "
       "(official suite)")
def readonly_referrers(s):
    ro = s.need(readonly_content)
    if not ro.referrers:
        raise Skipped("no --ro-referrers")
    for digest in ro.referrers:
        resp, _ = s.referrers(ro.repo, digest)
        doc = resp.json()
        expect(resp.header("Content-Type") == OCI_INDEX and doc.get("schemaVersion") == 2
               and doc.get("mediaType") == OCI_INDEX, f"referrers of {digest} is not an OCI image index")
