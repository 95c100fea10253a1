"""HTTP: one request per fresh connection, responses, and the URLs and headers of the API."""

import http.client
import json
import re
import ssl
import sys
import urllib.parse

from .expect import Failure, expect
from .media_types import OCI_INDEX, OCI_MANIFEST


TIMEOUT = 30  # seconds, per request


class Response:
    def __init__(self, method, url, status, headers, body):
        self.method, self.url, self.status, self.headers, self.body = method, url, status, headers, body
        self.path = urllib.parse.urlsplit(url).path

    def header(self, name):
        """All values of a header joined with ', ' (None if absent)."""
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ", ".join(values) if values else None

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def snippet(self):
        return self.body[:160].decode("utf-8", "replace")

    def summary(self):
        return f"{self.status} {self.snippet()!r}" if self.status >= 400 and self.body else str(self.status)


class Client:
    def __init__(self, base_url, verbose):
        self.base = base_url.rstrip("/")
        self.verbose = verbose

    def url(self, target, params=None):
        url = target if "://" in target else self.base + target
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
        return url

    def request(self, method, target, body=None, headers=None, params=None, chunked=False):
        """One request on a fresh connection; `chunked` sends the body with Transfer-Encoding: chunked."""
        url = self.url(target, params)
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.netloc, timeout=TIMEOUT,
                                               context=ssl._create_unverified_context())
        else:
            conn = http.client.HTTPConnection(parts.netloc, timeout=TIMEOUT)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            try:
                conn.request(method, path, body=iter([body]) if chunked else body, headers=headers or {},
                             encode_chunked=chunked)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server may have answered early (e.g. 413) and closed; read it below
            raw = conn.getresponse()
            try:
                body = raw.read()
            except http.client.IncompleteRead as err:
                raise Failure(f"{method} {parts.path} -> {raw.status}: body ended after {len(err.partial)} "
                              "bytes, short of its Content-Length (broken HTTP framing)") from None
            resp = Response(method, url, raw.status, raw.getheaders(), body)
        finally:
            conn.close()
        if self.verbose:
            print(f"    {method} {url} -> {resp.status}", file=sys.stderr)
        return resp


def location(resp):
    """The response's Location header resolved (relative or absolute) against the request URL."""
    loc = resp.header("Location")
    expect(loc, f"{resp.method} {resp.path} -> {resp.status} without a Location header")
    return urllib.parse.urljoin(resp.url, loc)


def next_link(resp):
    """Target of a RFC 5988 Link header with rel="next", resolved; None if absent."""
    link = resp.header("Link")
    if not link:
        return None
    m = re.search(r'<([^>]*)>\s*;\s*rel="?next"?', link)
    expect(m, f'Link header {link!r} is not of the form <url>; rel="next"')
    return urllib.parse.urljoin(resp.url, m.group(1))


def oci_tags(resp):
    """The tags an OCI-Tag header lists."""
    return {t.strip() for t in (resp.header("OCI-Tag") or "").split(",") if t.strip()}


def blobs(repo, digest):
    return f"/v2/{repo}/blobs/{digest}"


def manifests(repo, ref):
    return f"/v2/{repo}/manifests/{ref}"


def uploads(repo):
    return f"/v2/{repo}/blobs/uploads/"


# request headers
OCTET = {"Content-Type": "application/octet-stream"}


class Headers(list):
    """Request headers as (name, value) pairs, so a name can repeat: http.client sends each pair
    as its own header line, as Go's client does for the official suite's two Accept lines."""

    def items(self):
        return list.__iter__(self)

    def __iter__(self):
        return (name for name, _ in list.__iter__(self))


# The official suite's manifest requests: one Accept line per OCI manifest media type.
ACCEPT_OCI = Headers([("Accept", OCI_INDEX), ("Accept", OCI_MANIFEST)])
