"""What a check asserts: Failure and Skipped, status and spec error-body expectations."""

import re


class Failure(Exception):
    """The registry did not do what the check requires."""


class Skipped(Exception):
    """The check does not apply (e.g. an optional feature is absent)."""


SPEC_ERROR_CODES = {
    "BLOB_UNKNOWN", "BLOB_UPLOAD_INVALID", "BLOB_UPLOAD_UNKNOWN", "DIGEST_INVALID",
    "MANIFEST_BLOB_UNKNOWN", "MANIFEST_INVALID", "MANIFEST_UNKNOWN", "NAME_INVALID",
    "NAME_UNKNOWN", "SIZE_INVALID", "UNAUTHORIZED", "DENIED", "UNSUPPORTED", "TOOMANYREQUESTS",
    # legacy Docker codes the spec says clients may encounter
    "TAG_INVALID", "MANIFEST_UNVERIFIED",
}


def expect(cond, reason):
    if not cond:
        raise Failure(reason)


def expect_status(resp, *codes):
    expect(resp.status in codes,
           f"{resp.method} {resp.path}: expected {'/'.join(map(str, codes))}, got {resp.summary()}")


def expect_4xx(resp):
    expect(400 <= resp.status < 500, f"{resp.method} {resp.path}: expected 4xx, got {resp.summary()}")
    error_codes(resp)


def error_codes(resp):
    """Codes of a JSON error body. A 4xx body MAY be in any format, but if it is JSON it
    MUST be {"errors": [{"code": ..., "message": ..., "detail": ...}]} with spec codes."""
    doc = resp.json()
    if doc is None:
        return []
    expect(isinstance(doc, dict) and isinstance(doc.get("errors"), list) and doc["errors"],
           f"{resp.method} {resp.path}: JSON error body lacks a non-empty 'errors' list: {resp.snippet()}")
    codes = []
    for err in doc["errors"]:
        code = err.get("code") if isinstance(err, dict) else None
        expect(isinstance(code, str) and re.fullmatch(r"[A-Z_]+", code),
               f"error code {code!r} is not uppercase letters/underscores")
        expect(code in SPEC_ERROR_CODES, f"error code {code} is not defined by the spec")
        expect(isinstance(err.get("message", ""), str), f"error message for {code} is not a string")
        codes.append(code)
    return codes


def expect_code(resp, *wanted):
    """A JSON error body containing one of the wanted codes."""
    expect(resp.json() is not None, f"{resp.method} {resp.path} -> {resp.status}: "
           f"body is not a JSON error document: {resp.snippet()!r}")
    codes = error_codes(resp)
    expect(any(c in codes for c in wanted), f"expected error code {'/'.join(wanted)}, got {codes}")
