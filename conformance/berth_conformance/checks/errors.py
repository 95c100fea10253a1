"""errors: the spec's error codes and invalid names."""

import hashlib
import os

from ..checklist import EXT, MUST, SHOULD, check
from ..client import OCTET, blobs, location, manifests, uploads
from ..content import Content, digest_of, random_blob
from ..expect import error_codes, expect_4xx, expect_code, expect_status
from ..fixtures import manifest_repo, pull_content
from ..media_types import OCI_MANIFEST


@check("errors", "blob-unknown", SHOULD, "GET of an unknown blob fails with BLOB_UNKNOWN")
def errors_blob_unknown(s):
    resp = s.get(blobs(s.need(pull_content).repo, digest_of(os.urandom(8))))
    expect_status(resp, 404)
    expect_code(resp, "BLOB_UNKNOWN")


@check("errors", "manifest-unknown", SHOULD, "GET of an unknown tag fails with MANIFEST_UNKNOWN")
def errors_manifest_unknown(s):
    resp = s.get(manifests(s.need(pull_content).repo, "no-such-tag"))
    expect_status(resp, 404)
    expect_code(resp, "MANIFEST_UNKNOWN")


@check("errors", "name-unknown", SHOULD, "GET /tags/list of a nonexistent repository fails with NAME_UNKNOWN")
def errors_name_unknown(s):
    resp = s.get(f"/v2/{s.repo('never-created')}/tags/list")
    expect_status(resp, 404)
    expect_code(resp, "NAME_UNKNOWN")


@check("errors", "upload-unknown", MUST, "GET, PATCH and PUT on an unknown upload session return 404")
def errors_upload_unknown(s):
    url = uploads(s.repo("push")) + "3f0b6c2e-0000-4000-8000-000000000000"
    blob = random_blob(size=16)
    for resp in (s.get(url), s.patch(url, blob.data, start=0), s.put_blob(url, blob)):
        expect_status(resp, 404)
        error_codes(resp)


@check("errors", "upload-unknown-code", SHOULD, "an unknown upload session fails with BLOB_UPLOAD_UNKNOWN")
def errors_upload_unknown_code(s):
    resp = s.get(uploads(s.repo("push")) + "3f0b6c2e-0000-4000-8000-000000000000")
    expect_status(resp, 404)
    expect_code(resp, "BLOB_UPLOAD_UNKNOWN")


@check("errors", "digest-invalid", SHOULD, "a blob upload closed with a mismatching digest fails with DIGEST_INVALID")
def errors_digest_invalid(s):
    resp = s.start_upload(s.repo("push"))
    expect_status(resp, 202)
    resp = s.request("PUT", location(resp), body=b"payload", headers=OCTET, params={"digest": digest_of(b"other")})
    expect_status(resp, 400)
    expect_code(resp, "DIGEST_INVALID")


@check("errors", "digest-malformed", SHOULD, "closing an upload with a malformed or unsupported digest returns 400 DIGEST_INVALID (spec main)")
def errors_digest_malformed(s):
    for bad in ("sha256:xyz", "md5:" + hashlib.md5(b"payload").hexdigest(), "nocolon"):
        resp = s.start_upload(s.repo("push"))
        expect_status(resp, 202)
        resp = s.request("PUT", location(resp), body=b"payload", headers=OCTET, params={"digest": bad})
        expect_status(resp, 400)
        expect_code(resp, "DIGEST_INVALID")


@check("errors", "blob-malformed-digest", EXT, "GET /blobs/<malformed digest> returns 400 DIGEST_INVALID")
def errors_blob_malformed_digest(s):
    resp = s.get(blobs(s.need(pull_content).repo, "sha256:xyz"))
    expect_status(resp, 400)
    expect_code(resp, "DIGEST_INVALID")


@check("errors", "manifest-invalid", SHOULD, "PUT of a malformed manifest fails with MANIFEST_INVALID")
def errors_manifest_invalid(s):
    m = s.need(manifest_repo)
    resp = s.put_manifest(m.repo, "garbage", Content(b"blablabla", OCI_MANIFEST))
    expect_status(resp, 400)
    expect_code(resp, "MANIFEST_INVALID")


@check("errors", "manifest-digest-invalid", SHOULD, "PUT manifest to a mismatching digest fails with DIGEST_INVALID")
def errors_manifest_digest_invalid(s):
    resp = s.requires("manifest-digest-mismatch")
    expect_status(resp, 400)
    expect_code(resp, "DIGEST_INVALID")


@check("errors", "tag-invalid", EXT, "PUT manifest with an over-long tag fails with 400 TAG_INVALID")
def errors_tag_invalid(s):
    resp = s.requires("tag-too-long")
    expect_status(resp, 400)
    expect_code(resp, "TAG_INVALID")


INVALID_NAMES = ["Upper", "double..dot", "-leading", "trailing-", "under___score", "dash-.dot"]


@check("errors", "name-invalid", MUST, "requests naming an invalid repository are refused with 4xx")
def errors_name_invalid(s):
    for name in INVALID_NAMES:
        full = f"{s.namespace}/{s.run_id}/{name}"
        expect_4xx(s.start_upload(full))
        expect_4xx(s.get(f"/v2/{full}/tags/list"))


@check("errors", "name-invalid-code", SHOULD, "an invalid repository name fails with 400 NAME_INVALID")
def errors_name_invalid_code(s):
    for name in INVALID_NAMES:
        resp = s.start_upload(f"{s.namespace}/{s.run_id}/{name}")
        expect_status(resp, 400)
        expect_code(resp, "NAME_INVALID")
