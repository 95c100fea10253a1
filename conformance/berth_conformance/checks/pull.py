"""pull: GET and HEAD of blobs and manifests (spec: Pull)."""

import os

from ..checklist import MUST, SHOULD, check
from ..client import blobs, manifests
from ..content import digest_matches, digest_of
from ..expect import error_codes, expect, expect_status
from ..fixtures import pull_content
from ..media_types import DOCKER_LIST, DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST


@check("pull", "blob-get", MUST, "GET an existing blob returns 200 and exactly its bytes")
def pull_blob_get(s):
    p = s.need(pull_content)
    layer = p.tagged.layers[0]
    resp = s.get(blobs(p.repo, layer.digest))
    expect_status(resp, 200)
    expect(resp.body == layer.data, "body differs from the uploaded blob")
    dcd = resp.header("Docker-Content-Digest")
    expect(dcd is None or digest_matches(dcd, resp.body), f"Docker-Content-Digest {dcd} does not match the body")


@check("pull", "blob-get-digest-header", SHOULD, "GET blob response carries Docker-Content-Digest")
def pull_blob_get_digest_header(s):
    p = s.need(pull_content)
    resp = s.get(blobs(p.repo, p.tagged.config.digest))
    expect_status(resp, 200)
    expect(resp.header("Docker-Content-Digest") == p.tagged.config.digest,
           f"Docker-Content-Digest is {resp.header('Docker-Content-Digest')}")


@check("pull", "blob-head", MUST, "HEAD an existing blob returns 200 without a body")
def pull_blob_head(s):
    p = s.need(pull_content)
    resp = s.head(blobs(p.repo, p.tagged.config.digest))
    expect_status(resp, 200)
    expect(resp.body == b"", "HEAD response has a body")
    dcd = resp.header("Docker-Content-Digest")
    expect(dcd in (None, p.tagged.config.digest), f"Docker-Content-Digest {dcd} does not match")


@check("pull", "blob-head-headers", SHOULD, "HEAD blob reports Content-Length and Docker-Content-Digest")
def pull_blob_head_headers(s):
    p = s.need(pull_content)
    layer = p.tagged.layers[1]
    resp = s.head(blobs(p.repo, layer.digest))
    expect_status(resp, 200)
    expect(resp.header("Content-Length") == str(layer.size),
           f"Content-Length {resp.header('Content-Length')}, blob size {layer.size}")
    expect(resp.header("Docker-Content-Digest") == layer.digest,
           f"Docker-Content-Digest is {resp.header('Docker-Content-Digest')}")


@check("pull", "blob-missing", MUST, "GET and HEAD of an unknown blob return 404")
def pull_blob_missing(s):
    p = s.need(pull_content)
    unknown = digest_of(os.urandom(32))
    expect_status(s.get(blobs(p.repo, unknown)), 404)
    expect_status(s.head(blobs(p.repo, unknown)), 404)


@check("pull", "blob-range", SHOULD, "GET blob with Range: bytes=a-b returns 206, Content-Range and the slice")
def pull_blob_range(s):
    p = s.need(pull_content)
    layer = p.tagged.layers[0]
    resp = s.get(blobs(p.repo, layer.digest), headers={"Range": "bytes=10-99"})
    expect_status(resp, 206)
    expect(resp.body == layer.data[10:100], f"got {len(resp.body)} bytes, not bytes 10-99")
    expect(resp.header("Content-Range") == f"bytes 10-99/{layer.size}",
           f"Content-Range is {resp.header('Content-Range')!r}")


@check("pull", "blob-range-open", SHOULD, "GET blob with open-ended and suffix ranges returns 206 and the tail")
def pull_blob_range_open(s):
    p = s.need(pull_content)
    layer = p.tagged.layers[0]
    for spec, want in ((f"bytes={layer.size - 100}-", layer.data[-100:]), ("bytes=-50", layer.data[-50:])):
        resp = s.get(blobs(p.repo, layer.digest), headers={"Range": spec})
        expect_status(resp, 206)
        expect(resp.body == want, f"Range {spec}: got {len(resp.body)} bytes, expected {len(want)}")


@check("pull", "blob-range-unsatisfiable", SHOULD, "GET blob with a range beyond its end returns 416")
def pull_blob_range_unsatisfiable(s):
    p = s.need(pull_content)
    layer = p.tagged.layers[0]
    expect_status(s.get(blobs(p.repo, layer.digest), headers={"Range": f"bytes={layer.size + 10}-"}), 416)


@check("pull", "manifest-get-tag", MUST, "GET manifest by tag returns 200 and the exact bytes pushed")
def pull_manifest_get_tag(s):
    p = s.need(pull_content)
    resp = s.get(manifests(p.repo, "latest"), headers={"Accept": OCI_MANIFEST})
    expect_status(resp, 200)
    expect(resp.body == p.tagged.manifest.data, "body differs from the pushed manifest")


@check("pull", "manifest-get-digest", MUST, "GET manifest by digest returns 200 and the exact bytes pushed")
def pull_manifest_get_digest(s):
    p = s.need(pull_content)
    for image in (p.tagged, p.by_digest):
        resp = s.get(manifests(p.repo, image.manifest.digest), headers={"Accept": OCI_MANIFEST})
        expect_status(resp, 200)
        expect(resp.body == image.manifest.data, "body differs from the pushed manifest")


@check("pull", "manifest-content-type", SHOULD, "GET manifest Content-Type is the pushed media type, without parameters")
def pull_manifest_content_type(s):
    p = s.need(pull_content)
    resp = s.get(manifests(p.repo, "latest"), headers={"Accept": OCI_MANIFEST})
    expect_status(resp, 200)
    expect(resp.header("Content-Type") == OCI_MANIFEST, f"Content-Type is {resp.header('Content-Type')!r}")


@check("pull", "manifest-get-digest-header", SHOULD, "GET manifest carries Docker-Content-Digest equal to its digest")
def pull_manifest_get_digest_header(s):
    p = s.need(pull_content)
    resp = s.get(manifests(p.repo, "latest"), headers={"Accept": OCI_MANIFEST})
    expect_status(resp, 200)
    expect(resp.header("Docker-Content-Digest") == p.tagged.manifest.digest,
           f"Docker-Content-Digest is {resp.header('Docker-Content-Digest')}")


@check("pull", "manifest-head", MUST, "HEAD manifest by tag and by digest returns 200 (digest header, if any, matches)")
def pull_manifest_head(s):
    p = s.need(pull_content)
    for ref, image in (("latest", p.tagged), (p.tagged.manifest.digest, p.tagged),
                       (p.by_digest.manifest.digest, p.by_digest)):
        resp = s.head(manifests(p.repo, ref), headers={"Accept": OCI_MANIFEST})
        expect_status(resp, 200)
        dcd = resp.header("Docker-Content-Digest")
        expect(dcd in (None, image.manifest.digest), f"HEAD {ref}: Docker-Content-Digest {dcd} does not match")


@check("pull", "manifest-head-headers", SHOULD, "HEAD manifest reports Content-Length and Docker-Content-Digest")
def pull_manifest_head_headers(s):
    p = s.need(pull_content)
    resp = s.head(manifests(p.repo, "latest"), headers={"Accept": OCI_MANIFEST})
    expect_status(resp, 200)
    expect(resp.header("Content-Length") == str(p.tagged.manifest.size),
           f"Content-Length {resp.header('Content-Length')}, manifest size {p.tagged.manifest.size}")
    expect(resp.header("Docker-Content-Digest") == p.tagged.manifest.digest,
           f"Docker-Content-Digest is {resp.header('Docker-Content-Digest')}")


@check("pull", "manifest-accept-list", MUST, "GET manifest with a multi-type Accept header returns it")
def pull_manifest_accept_list(s):
    p = s.need(pull_content)
    accept = ", ".join([DOCKER_MANIFEST, DOCKER_LIST, OCI_INDEX, OCI_MANIFEST])
    resp = s.get(manifests(p.repo, "latest"), headers={"Accept": accept})
    expect_status(resp, 200)
    expect(resp.body == p.tagged.manifest.data, "body differs from the pushed manifest")


@check("pull", "manifest-missing", MUST, "GET and HEAD of an unknown tag or digest return 404")
def pull_manifest_missing(s):
    p = s.need(pull_content)
    for ref in ("no-such-tag", digest_of(os.urandom(32))):
        expect_status(s.get(manifests(p.repo, ref)), 404)
        expect_status(s.head(manifests(p.repo, ref)), 404)


@check("pull", "manifest-invalid-tag-404", MUST, "GET/HEAD manifest '.INVALID_MANIFEST_NAME' returns 404 (official suite)")
def pull_manifest_invalid_tag_404(s):
    p = s.need(pull_content)
    expect_status(s.head(manifests(p.repo, ".INVALID_MANIFEST_NAME")), 404)
    expect_status(s.get(manifests(p.repo, ".INVALID_MANIFEST_NAME")), 404)


@check("pull", "manifest-malformed-digest", MUST, "GET manifest 'sha256:totallywrong' returns 400 or 404 with spec error JSON (official suite)")
def pull_manifest_malformed_digest(s):
    p = s.need(pull_content)
    resp = s.get(manifests(p.repo, "sha256:totallywrong"))
    expect_status(resp, 400, 404)
    if resp.status == 400:
        expect(error_codes(resp), f"400 without a JSON error body: {resp.snippet()!r}")


@check("pull", "unknown-repository", MUST, "pulling from a nonexistent repository returns 404")
def pull_unknown_repository(s):
    repo = s.repo("never-created")
    expect_status(s.get(manifests(repo, "latest")), 404)
    expect_status(s.get(blobs(repo, digest_of(b"x"))), 404)
