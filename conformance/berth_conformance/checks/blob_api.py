"""push, pull: the rewritten official suite's blob API tests, once per digest algorithm.

The sha256 checks are MUST; their sha512 twins are SHOULD like this suite's other sha512 checks.
The uploads and their verification are in blob_uploads.
"""

import os
import types

from ..blob_uploads import (
    chunked_session, delete_blob_verified, expect_blob_stored, official_chunk_size, push_by_single_post,
    push_chunked, push_post_put, push_streamed)
from ..checklist import MUST, SHOULD, check, fixture
from ..client import ACCEPT_OCI, OCTET, blobs, location, manifests, uploads
from ..content import Content, digest_of, random_blob
from ..expect import error_codes, expect, expect_status
from ..fixtures import pull_content


ALGORITHMS = (("sha256", "", MUST), ("sha512", "-sha512", SHOULD))


def register_blob_api_checks(alg, suffix, level):
    """The official blob API tests for one digest algorithm."""

    @check("push", "upload-methods" + suffix, level,
           f"{alg} blobs via single POST, POST+PUT, 1 chunk, 3 chunks, last chunk in PUT and a streamed "
           "PATCH: 201, Location serves it, HEAD/GET with Content-Length, DELETE then 404 (official suite)")
    def upload_methods(s):
        repo = s.repo("blobapi-" + alg)
        for what, push in (("single POST", push_by_single_post), ("POST+PUT", push_post_put),
                           ("streamed PATCH", push_streamed)):
            blob = random_blob(size=512, alg=alg)
            expect_blob_stored(s, push(s, repo, blob), repo, blob, what)
            delete_blob_verified(s, repo, blob.digest, what)
        for what, put_last in (("one chunk", False), ("three chunks", False), ("last chunk in PUT", True)):
            url, minimum, size = chunked_session(s, repo)
            blob = random_blob(size=512 if what == "one chunk" else size, alg=alg)
            expect_blob_stored(s, push_chunked(s, url, blob, minimum, put_last=put_last), repo, blob, what)
            delete_blob_verified(s, repo, blob.digest, what)

    for name, put_last, title in (
            ("chunk-out-of-order-recover", False, "a chunk at a wrong offset (ahead, or the first again) gets 416; "
             "GET status 204 + Range; the upload then completes"),
            ("chunk-out-of-order-put", True, "a final chunk sent out of order in the closing PUT gets 416 (spec main); "
             "the upload then completes")):
        def out_of_order(s, put_last=put_last):
            repo = s.repo("blobapi-" + alg)
            url, minimum, size = chunked_session(s, repo)
            blob = random_blob(size=size, alg=alg)
            resp = push_chunked(s, url, blob, minimum, put_last=put_last, out_of_order=True)
            expect_blob_stored(s, resp, repo, blob, "out-of-order upload")
            delete_blob_verified(s, repo, blob.digest, "out-of-order upload")
        check("push", name + suffix, level, f"{alg}: {title} (official suite)")(out_of_order)

    @check("push", "digest-mismatch-methods" + suffix, level,
           f"{alg} uploads closed with a digest the bytes do not match get 400 by single POST, POST+PUT, "
           "chunks (last one in the PATCHes or in the PUT) and stream; nothing is stored (official suite)")
    def digest_mismatch_methods(s):
        repo = s.repo("blobapi-" + alg)
        for what in ("single POST", "POST+PUT", "chunked", "last chunk in PUT", "streamed"):
            url, minimum, size = chunked_session(s, repo)
            blob = random_blob(size=size, alg=alg)
            blob.data += b"oh no"  # the digest stays that of the original bytes
            if what == "single POST":
                resp = s.request("POST", uploads(repo), body=blob.data, headers=OCTET, params={"digest": blob.digest})
                expect(resp.status in (400, 202), f"{what}: expected 400 (or a 202 session), got {resp.summary()}")
                if resp.status == 202:
                    resp = s.put_blob(location(resp), blob)
            elif what == "POST+PUT":
                resp = s.put_blob(url, blob)
            elif what in ("chunked", "last chunk in PUT"):
                chunk = official_chunk_size(len(blob.data), minimum)
                starts = list(range(0, len(blob.data), chunk))
                final = starts.pop() if what == "last chunk in PUT" else None
                for start in starts:
                    got = s.patch(url, blob.data[start:start + chunk], start=start)
                    expect(got.status == 202, f"{what}: PATCH at {start}: expected 202, got {got.summary()}")
                    url = location(got)
                resp = (s.put_blob(url, blob, body=b"") if final is None else
                        s.put_blob(url, blob, body=blob.data[final:],
                                   headers={"Content-Range": f"{final}-{len(blob.data) - 1}"}))
            else:
                got = s.request("PATCH", url, body=blob.data, headers=OCTET, chunked=True)
                expect(got.status == 202, f"{what}: PATCH: expected 202, got {got.summary()}")
                resp = s.put_blob(location(got), blob, body=b"")
            expect(resp.status == 400, f"{what}: {resp.method} closing with a wrong digest: expected 400, "
                   f"got {resp.summary()}")
            error_codes(resp)
            expect_status(s.head(blobs(repo, blob.digest)), 404)

    @check("push", "well-known-blobs" + suffix, level,
           f"the zero-byte blob and the {{}} blob ({alg}): pushed, HEAD Content-Length, GET exact, "
           "DELETE then 404 (official suite)")
    def well_known_blobs(s):
        repo = s.repo("blobapi-" + alg)
        for data in (b"", b"{}"):
            blob = Content(data, "application/octet-stream", alg)
            what = f"{len(data)}-byte blob {blob.digest[:20]}…"
            expect_blob_stored(s, push_post_put(s, repo, blob), repo, blob, what)
            delete_blob_verified(s, repo, blob.digest, what)

    @check("pull", "blob-range-official" + suffix, level,
           f"{alg} blob of 2048 bytes, Range 500-1499, 500-, -500, 2000-5000 (206 with Content-Length and "
           "Content-Range), 500-0 and 5000-10000 (416): exactly that, or the whole blob with 200 (official suite)")
    def blob_range_official(s):
        repo = s.repo("blobapi-" + alg)
        blob = random_blob(size=2048, alg=alg)
        s.upload_blob(repo, blob)
        for spec, first, last in (("500-1499", 500, 1499), ("500-", 500, 2047), ("-500", 1548, 2047),
                                  ("2000-5000", 2000, 2047), ("500-0", None, None), ("5000-10000", None, None)):
            resp = s.get(blobs(repo, blob.digest), headers={"Range": f"bytes={spec}"})
            if resp.status == 200:  # the official suite accepts a registry ignoring Range
                expect(resp.body == blob.data and resp.header("Content-Length") == "2048",
                       f"Range {spec}: 200 without the whole blob and its Content-Length")
                continue
            if first is None:
                expect(resp.status == 416, f"Range {spec}: expected 416 (or 200), got {resp.summary()}")
                continue
            expect(resp.status == 206, f"Range {spec}: expected 206 (or 200), got {resp.summary()}")
            want = blob.data[first:last + 1]
            expect(resp.body == want, f"Range {spec}: got {len(resp.body)} bytes, not bytes {first}-{last}")
            expect(resp.header("Content-Length") == str(len(want)),
                   f"Range {spec}: Content-Length {resp.header('Content-Length')}, expected {len(want)}")
            expect(resp.header("Content-Range") in (f"bytes {first}-{last}/2048", f"bytes {first}-{last}/*"),
                   f"Range {spec}: Content-Range {resp.header('Content-Range')!r}")
        delete_blob_verified(s, repo, blob.digest, "range blob")


for _alg, _suffix, _level in ALGORITHMS:
    register_blob_api_checks(_alg, _suffix, _level)


@check("push", "mount-sha512", SHOULD, "sha512 mounts: ?mount=&from= and ?mount= alone give 201 or 202 and the "
       "blob ends up stored; a blob the source lacks gives a 202 session (official suite)")
def push_mount_sha512(s):
    src, blob = s.repo("blobapi-sha512-src"), random_blob(size=512, alg="sha512")
    s.upload_blob(src, blob)
    for what, repo, params in (("mount from", s.repo("blobapi-sha512-m1"), {"mount": blob.digest, "from": src}),
                               ("anonymous mount", s.repo("blobapi-sha512-m2"), {"mount": blob.digest})):
        resp = s.request("POST", uploads(repo), params=params)
        expect(resp.status in (201, 202), f"{what}: expected 201 or 202, got {resp.summary()}")
        if resp.status == 202:
            resp = s.put_blob(location(resp), blob)
        expect_blob_stored(s, resp, repo, blob, what)
    missing = random_blob(size=512, alg="sha512")
    resp = s.request("POST", uploads(s.repo("blobapi-sha512-m3")), params={"mount": missing.digest, "from": src})
    expect(resp.status == 202, f"mount of a blob the source lacks: expected 202, got {resp.summary()}")
    expect_status(s.put_blob(location(resp), missing), 201)


@check("pull", "blob-missing-sha512", SHOULD, "GET of a sha512 blob never pushed returns 404 (official suite)")
def pull_blob_missing_sha512(s):
    expect_status(s.get(blobs(s.need(pull_content).repo, digest_of(os.urandom(32), "sha512"))), 404)


@fixture
def range_blob(s):
    repo, blob = s.repo("pull"), random_blob(size=2048)
    s.upload_blob(repo, blob)
    return types.SimpleNamespace(repo=repo, blob=blob)


@check("pull", "blob-range-past-end", SHOULD, "Range bytes=2000-5000 of a 2048-byte blob returns 206 with bytes 2000-2047 (official suite)")
def pull_blob_range_past_end(s):
    r = s.need(range_blob)
    resp = s.get(blobs(r.repo, r.blob.digest), headers={"Range": "bytes=2000-5000"})
    expect_status(resp, 206)
    expect(resp.body == r.blob.data[2000:], f"got {len(resp.body)} bytes, not bytes 2000-2047")
    expect(resp.header("Content-Range") in ("bytes 2000-2047/2048", "bytes 2000-2047/*"),
           f"Content-Range is {resp.header('Content-Range')!r}")


@check("pull", "digest-header-required", MUST, "Docker-Content-Digest on GET/HEAD of blobs and manifests and on the 201 "
       "closing an upload (spec main; official suite with OCI_VERSION=dev)")
def pull_digest_header_required(s):
    p = s.need(pull_content)
    layer = p.tagged.layers[0]
    for resp, want in ((s.get(blobs(p.repo, layer.digest)), layer.digest),
                       (s.head(blobs(p.repo, layer.digest)), layer.digest),
                       (s.get(manifests(p.repo, "latest"), headers=ACCEPT_OCI), p.tagged.manifest.digest),
                       (s.head(manifests(p.repo, "latest"), headers=ACCEPT_OCI), p.tagged.manifest.digest),
                       (s.get(manifests(p.repo, p.by_digest.manifest.digest), headers=ACCEPT_OCI),
                        p.by_digest.manifest.digest),
                       (s.head(manifests(p.repo, p.by_digest.manifest.digest), headers=ACCEPT_OCI),
                        p.by_digest.manifest.digest)):
        expect_status(resp, 200)
        expect(resp.header("Docker-Content-Digest") == want,
               f"{resp.method} {resp.path}: Docker-Content-Digest is {resp.header('Docker-Content-Digest')}")
    for what, push in (("POST+PUT", push_post_put), ("streamed PATCH", push_streamed)):
        blob = random_blob(size=512)
        resp = push(s, p.repo, blob)
        expect_status(resp, 201)
        expect(resp.header("Docker-Content-Digest") == blob.digest,
               f"{what}: the 201 carries Docker-Content-Digest {resp.header('Docker-Content-Digest')}")
    url, minimum, size = chunked_session(s, p.repo)
    blob = random_blob(size=size)
    resp = push_chunked(s, url, blob, minimum)
    expect_status(resp, 201)
    expect(resp.header("Docker-Content-Digest") == blob.digest,
           f"chunked: the 201 carries Docker-Content-Digest {resp.header('Docker-Content-Digest')}")
