"""push: blob upload sessions, monolithic, streamed and chunked uploads (spec: Push)."""

from ..checklist import EXT, MUST, SHOULD, check
from ..client import OCTET, blobs, location, manifests, uploads
from ..content import build_image, digest_matches, digest_of, random_blob
from ..expect import error_codes, expect, expect_status
from ..media_types import OCI_MANIFEST


@check("push", "post-session", MUST, "POST /blobs/uploads/ returns 202 with a Location")
def push_post_session(s):
    resp = s.start_upload(s.repo("push"))
    expect_status(resp, 202)
    location(resp)


@check("push", "session-unique", MUST, "each POST /blobs/uploads/ yields a distinct session Location")
def push_session_unique(s):
    locs = set()
    for _ in range(3):
        resp = s.start_upload(s.repo("push"))
        expect_status(resp, 202)
        locs.add(location(resp))
    expect(len(locs) == 3, f"session locations repeat: {sorted(locs)}")


@check("push", "monolithic-put", MUST, "PUT <location>?digest= with the blob returns 201 with a Location")
def push_monolithic_put(s):
    blob = random_blob()
    resp = s.start_upload(s.repo("push"))
    expect_status(resp, 202)
    resp = s.put_blob(location(resp), blob)
    expect_status(resp, 201)
    s.state["monolithic"] = (blob, location(resp))


@check("push", "blob-location-pullable", MUST, "the Location returned for a stored blob is pullable")
def push_blob_location_pullable(s):
    blob, loc = s.requires("monolithic")
    resp = s.get(loc)
    expect_status(resp, 200)
    expect(resp.body == blob.data, "body differs from the uploaded blob")
    resp = s.get(blobs(s.repo("push"), blob.digest))
    expect_status(resp, 200)
    expect(resp.body == blob.data, "body at /blobs/<digest> differs from the uploaded blob")


@check("push", "empty-blob", MUST, "a zero-length blob can be pushed and pulled")
def push_empty_blob(s):
    blob = random_blob(size=0)
    s.upload_blob(s.repo("push"), blob)
    resp = s.get(blobs(s.repo("push"), blob.digest))
    expect_status(resp, 200)
    expect(resp.body == b"", f"got {len(resp.body)} bytes")


@check("push", "transfer-encoding-chunked", MUST, "blob and manifest bodies sent with Transfer-Encoding: chunked are accepted")
def push_transfer_encoding_chunked(s):
    repo, image = s.repo("push"), build_image()
    for blob in image.blobs:
        resp = s.start_upload(repo)
        expect_status(resp, 202)
        expect_status(s.request("PUT", location(resp), body=blob.data, headers=OCTET,
                                params={"digest": blob.digest}, chunked=True), 201)
    resp = s.request("PUT", manifests(repo, "chunked"), body=image.manifest.data,
                     headers={"Content-Type": OCI_MANIFEST}, chunked=True)
    expect_status(resp, 201)
    got = s.get(manifests(repo, "chunked"), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == image.manifest.data, "manifest differs")


@check("push", "streamed-patch", MUST, "PATCH of a whole blob without Content-Range returns 202 with Location and Range (official suite)")
def push_streamed_patch(s):
    blob = random_blob()
    resp = s.start_upload(s.repo("push"))
    expect_status(resp, 202)
    resp = s.patch(location(resp), blob.data)
    expect_status(resp, 202)
    loc = location(resp)
    expect(resp.header("Range") == f"0-{blob.size - 1}", f"Range is {resp.header('Range')!r}")
    s.state["streamed"] = (blob, loc)


@check("push", "streamed-close", MUST, "PUT ?digest= with an empty body closes a PATCHed upload with 201")
def push_streamed_close(s):
    blob, loc = s.requires("streamed")
    resp = s.put_blob(loc, blob, body=b"")
    expect_status(resp, 201)
    location(resp)
    resp = s.get(blobs(s.repo("push"), blob.digest))
    expect_status(resp, 200)
    expect(resp.body == blob.data, "stored blob differs from the PATCHed bytes")


@check("push", "single-post", MUST, "POST ?digest= with the blob returns 201 (stored) or 202 (session) with a Location")
def push_single_post(s):
    repo, blob = s.repo("push"), random_blob()
    resp = s.request("POST", uploads(repo), body=blob.data, headers=OCTET, params={"digest": blob.digest})
    expect_status(resp, 201, 202)
    loc = location(resp)
    got = s.get(blobs(repo, blob.digest))
    if resp.status == 201:
        expect_status(got, 200)
        expect(got.body == blob.data, "stored blob differs")
        s.state["single-post-created"] = True
    else:  # no single-POST support: the official suite requires the blob to be absent
        expect_status(got, 404)
        expect_status(s.put_blob(loc, blob), 201)


@check("push", "single-post-created", EXT, "berth stores a single-POST ?digest= upload directly (201)")
def push_single_post_created(s):
    s.requires("single-post-created")


def chunk_plan(post_resp):
    """Blob and split point for a two-chunk upload, honouring OCI-Chunk-Min-Length."""
    minimum = int(post_resp.header("OCI-Chunk-Min-Length") or 0)
    blob = random_blob(size=max(2 * minimum, 3000))
    return blob, max(minimum, blob.size // 2 + 1)


@check("push", "chunk-out-of-order", MUST, "PATCH of a chunk that does not start at the current offset returns 416")
def push_chunk_out_of_order(s):
    resp = s.start_upload(s.repo("push"))
    expect_status(resp, 202)
    blob, split = chunk_plan(resp)
    expect_status(s.patch(location(resp), blob.data[split:], start=split), 416)


@check("push", "chunk-first", MUST, "PATCH of the first chunk with Content-Range returns 202, Location and Range 0-<end>")
def push_chunk_first(s):
    resp = s.start_upload(s.repo("push"))
    expect_status(resp, 202)
    post_loc = location(resp)
    blob, split = chunk_plan(resp)
    resp = s.patch(post_loc, blob.data[:split], start=0)
    expect_status(resp, 202)
    s.state["chunked-loc"] = location(resp)
    expect(resp.header("Range") == f"0-{split - 1}", f"Range is {resp.header('Range')!r}, expected 0-{split - 1}")
    s.state["chunked"] = (blob, split, post_loc)


@check("push", "chunk-retry-416", MUST, "re-sending the first chunk to the POST Location returns 416 (official suite)")
def push_chunk_retry_416(s):
    blob, split, post_loc = s.requires("chunked")
    expect_status(s.patch(post_loc, blob.data[:split], start=0), 416)


@check("push", "upload-status", MUST, "GET on the Location of the last PATCH returns 204 with Location and Range 0-<end>")
def push_upload_status(s):
    _, split, _ = s.requires("chunked")
    resp = s.get(s.requires("chunked-loc"))
    expect_status(resp, 204)
    s.state["chunked-loc"] = location(resp)
    expect(resp.header("Range") == f"0-{split - 1}", f"Range is {resp.header('Range')!r}, expected 0-{split - 1}")


@check("push", "upload-status-post-location", MUST, "GET on the POST Location after a PATCH returns 204 with Location and Range (official suite)")
def push_upload_status_post_location(s):
    _, split, post_loc = s.requires("chunked")
    resp = s.get(post_loc)
    expect_status(resp, 204)
    location(resp)
    expect(resp.header("Range") == f"0-{split - 1}", f"Range is {resp.header('Range')!r}, expected 0-{split - 1}")


@check("push", "chunk-second", MUST, "PATCH of the next chunk at the latest Location returns 202 with Range 0-<end>")
def push_chunk_second(s):
    blob, split, _ = s.requires("chunked")
    resp = s.patch(s.requires("chunked-loc"), blob.data[split:], start=split)
    expect_status(resp, 202)
    s.state["chunked-last-loc"] = location(resp)
    expect(resp.header("Range") == f"0-{blob.size - 1}", f"Range is {resp.header('Range')!r}")


@check("push", "chunk-close", MUST, "PUT ?digest= without a body closes a chunked upload with 201 and the blob is intact")
def push_chunk_close(s):
    blob, _, _ = s.requires("chunked")
    loc = s.requires("chunked-last-loc")
    resp = s.put_blob(loc, blob, body=b"")
    expect_status(resp, 201)
    location(resp)
    got = s.get(blobs(s.repo("push"), blob.digest))
    expect_status(got, 200)
    expect(got.body == blob.data, "stored blob differs from the chunks")
    s.state["closed-upload"] = loc


@check("push", "upload-status-closed", SHOULD, "GET on a completed upload session returns 404")
def push_upload_status_closed(s):
    expect_status(s.get(s.requires("closed-upload")), 404)


@check("push", "chunk-final-in-put", MUST, "the final chunk may be sent in the closing PUT with Content-Range")
def push_chunk_final_in_put(s):
    repo = s.repo("push")
    resp = s.start_upload(repo)
    expect_status(resp, 202)
    blob, split = chunk_plan(resp)
    third = split + (blob.size - split) // 2
    resp = s.patch(location(resp), blob.data[:split], start=0)
    expect_status(resp, 202)
    resp = s.patch(location(resp), blob.data[split:third], start=split)
    expect_status(resp, 202)
    resp = s.put_blob(location(resp), blob, body=blob.data[third:],
                      headers={"Content-Range": f"{third}-{blob.size - 1}"})
    expect_status(resp, 201)
    got = s.get(blobs(repo, blob.digest))
    expect_status(got, 200)
    expect(got.body == blob.data, "stored blob differs from the three chunks")


@check("push", "upload-cancel", SHOULD, "DELETE on an upload session returns 204 and ends the session (spec main)")
def push_upload_cancel(s):
    resp = s.start_upload(s.repo("push"))
    expect_status(resp, 202)
    loc = location(resp)
    expect_status(s.delete(loc), 204)
    expect_status(s.get(loc), 404)


@check("push", "digest-mismatch", MUST, "closing an upload with a digest that does not match the content returns 400")
def push_digest_mismatch(s):
    repo, blob = s.repo("push"), random_blob()
    resp = s.start_upload(repo)
    expect_status(resp, 202)
    resp = s.request("PUT", location(resp), body=blob.data, headers=OCTET,
                     params={"digest": digest_of(b"something else")})
    expect_status(resp, 400)
    error_codes(resp)
    expect_status(s.head(blobs(repo, blob.digest)), 404)


@check("push", "sha512-blob", SHOULD, "a blob pushed with a sha512 digest is pullable by that digest")
def push_sha512_blob(s):
    repo, blob = s.repo("push"), random_blob(alg="sha512")
    s.upload_blob(repo, blob)
    resp = s.get(blobs(repo, blob.digest))
    expect_status(resp, 200)
    expect(resp.body == blob.data, "body differs")
    dcd = resp.header("Docker-Content-Digest")
    expect(dcd is None or digest_matches(dcd, blob.data), f"Docker-Content-Digest {dcd} does not match")
    resp = s.head(blobs(repo, blob.digest))
    expect_status(resp, 200)
    expect(resp.header("Content-Length") == str(blob.size), f"HEAD Content-Length {resp.header('Content-Length')}")


@check("push", "sha512-digest-algorithm", SHOULD, "POST ?digest-algorithm=sha512 then PATCH/PUT stores a sha512 blob (spec main)")
def push_sha512_digest_algorithm(s):
    repo, blob = s.repo("push"), random_blob(alg="sha512")
    resp = s.start_upload(repo, params={"digest-algorithm": "sha512"})
    expect_status(resp, 202)
    resp = s.patch(location(resp), blob.data, start=0)
    expect_status(resp, 202)
    expect_status(s.put_blob(location(resp), blob, body=b""), 201)
    resp = s.head(blobs(repo, blob.digest))
    expect_status(resp, 200)
    dcd = resp.header("Docker-Content-Digest")
    expect(dcd is None or digest_matches(dcd, blob.data), f"Docker-Content-Digest {dcd} does not match")
