"""Blob uploads by each method the rewritten official suite uses, and their verification.

The rewritten official suite (opencontainers/distribution-spec conformance/, June 2026) runs its
blob API tests once per digest algorithm, sha256 and sha512, without ?digest-algorithm=. Each blob
it pushes is then HEADed, pulled and deleted; after a 202 DELETE a HEAD must give 404.
"""

import re

from .client import OCTET, blobs, location, uploads
from .content import digest_matches
from .expect import error_codes, expect, expect_status


OFFICIAL_CHUNK_MIN = 1024  # the official suite never sends a chunk smaller than this (but the last)


def expect_blob_dcd(resp, blob):
    """Docker-Content-Digest, if present, is a digest of the blob (the spec lets it be the
    registry's canonical algorithm rather than the one pushed)."""
    dcd = resp.header("Docker-Content-Digest")
    expect(dcd is None or digest_matches(dcd, blob.data),
           f"{resp.method} {resp.path}: Docker-Content-Digest {dcd} is not a digest of the blob")


def expect_blob_stored(s, resp, repo, blob, what):
    """The 201 closing an upload: its Location serves the blob; HEAD and GET by digest give 200,
    Content-Length and the exact bytes."""
    expect_status(resp, 201)
    expect_blob_dcd(resp, blob)
    got = s.get(location(resp))
    expect_status(got, 200)
    expect(got.body == blob.data, f"{what}: the Location returned does not serve the blob")
    head = s.head(blobs(repo, blob.digest))
    expect_status(head, 200)
    expect(head.body == b"", f"{what}: HEAD has a body")
    expect(head.header("Content-Length") == str(blob.size),
           f"{what}: HEAD Content-Length {head.header('Content-Length')}, blob size {blob.size}")
    expect_blob_dcd(head, blob)
    got = s.get(blobs(repo, blob.digest))
    expect_status(got, 200)
    expect(got.body == blob.data, f"{what}: GET by digest differs from the blob")
    expect(got.header("Content-Length") == str(blob.size),
           f"{what}: GET Content-Length {got.header('Content-Length')}, blob size {blob.size}")
    expect_blob_dcd(got, blob)


def delete_blob_verified(s, repo, digest, what):
    """DELETE a blob: 202 and HEAD then 404; 400 UNSUPPORTED / 405 mean deletion is disabled."""
    resp = s.delete(blobs(repo, digest))
    if resp.status == 405 or (resp.status == 400 and "UNSUPPORTED" in (error_codes(resp) or [])):
        return False
    expect(resp.status == 202, f"{what}: DELETE {resp.path}: expected 202, got {resp.summary()}")
    expect_status(s.head(blobs(repo, digest)), 404)
    return True


def official_chunk_size(size, minimum):
    """Three chunks, but none under OCI-Chunk-Min-Length or 1024 bytes (the official suite's rule)."""
    return min(max(size // 3 + 1, minimum, OFFICIAL_CHUNK_MIN), size)


def push_by_single_post(s, repo, blob):
    """POST ?digest= with the blob; a 202 session is completed with a PUT of the blob."""
    resp = s.request("POST", uploads(repo), body=blob.data, headers=OCTET, params={"digest": blob.digest})
    expect_status(resp, 201, 202)
    if resp.status == 202:
        resp = s.put_blob(location(resp), blob)
    return resp


def push_post_put(s, repo, blob):
    resp = s.request("POST", uploads(repo))
    expect_status(resp, 202)
    return s.put_blob(location(resp), blob)


def push_streamed(s, repo, blob):
    """POST, one PATCH of the whole blob with Transfer-Encoding: chunked and no Content-Range
    (what Go's client sends for the official suite's stream test), then PUT ?digest=."""
    resp = s.start_upload(repo)
    expect_status(resp, 202)
    resp = s.request("PATCH", location(resp), body=blob.data, headers=OCTET, chunked=True)
    expect_status(resp, 202)
    return s.put_blob(location(resp), blob, body=b"")


def push_chunked(s, url, blob, minimum, put_last=False, out_of_order=False):
    """Chunks as the official suite sends them, from the session at `url`. put_last: the last chunk
    goes in the closing PUT. out_of_order: before each chunk, one at the wrong offset (the next
    one, or the first again when the next is past the end; a PUT ?digest= when put_last and it
    reaches the end) must get 416, and GET on that URL must then give 204 with Range 0-<last byte>."""
    size = blob.size
    chunk = official_chunk_size(size, minimum)
    last = -1
    while last < size - 1:
        if out_of_order:
            bad_start = last + 1 + chunk
            if bad_start >= size:
                bad_start = 0
            bad_end = min(bad_start + chunk - 1, size - 1)
            headers = {**OCTET, "Content-Range": f"{bad_start}-{bad_end}"}
            if put_last and bad_end == size - 1:
                bad_url = s.client.url(url, {"digest": blob.digest})
                resp = s.request("PUT", bad_url, body=blob.data[bad_start:bad_end + 1], headers=headers)
            else:
                bad_url = url
                resp = s.request("PATCH", bad_url, body=blob.data[bad_start:bad_end + 1], headers=headers)
            expect(resp.status == 416, f"{resp.method} of bytes {bad_start}-{bad_end} with {last + 1} bytes "
                   f"received: expected 416, got {resp.summary()}")
            if resp.header("Location"):
                url = location(resp)
            got = s.get(bad_url)
            expect(got.status == 204, f"GET upload status after the 416: expected 204, got {got.summary()}")
            url = location(got)
            rng = got.header("Range") or ""
            end = re.fullmatch(r"0-(-?\d+)", rng)
            expect(end, f"upload status Range {rng!r} after the 416 is not 0-<end>")
            expect(last < 0 or int(end.group(1)) == last, f"upload status Range {rng!r}, expected 0-{last}")
        start, last = last + 1, min(last + chunk, size - 1)
        headers = {**OCTET, "Content-Range": f"{start}-{last}"}
        if put_last and last == size - 1:
            return s.request("PUT", url, body=blob.data[start:last + 1], headers=headers,
                             params={"digest": blob.digest})
        resp = s.request("PATCH", url, body=blob.data[start:last + 1], headers=headers)
        expect(resp.status == 202, f"PATCH of bytes {start}-{last}: expected 202, got {resp.summary()}")
        url = location(resp)
    return s.put_blob(url, blob, body=b"")


def chunked_session(s, repo):
    """A new upload session: its URL and the blob size the official suite uses for three chunks."""
    resp = s.request("POST", uploads(repo), headers={"Content-Length": "0"})
    expect_status(resp, 202)
    minimum = int(resp.header("OCI-Chunk-Min-Length") or 0)
    return location(resp), minimum, 3 * max(minimum, OFFICIAL_CHUNK_MIN) - 5
