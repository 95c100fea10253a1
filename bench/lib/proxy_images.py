"""bench/proxy's images: a new random single-layer OCI image pushed into a registry over plain HTTP
(the layer from a file with curl -T, config and manifest with http.client)."""

import hashlib
import http.client
import json
import os
import subprocess
import tempfile
import time
import urllib.parse

from benchproc import log

MiB = 1 << 20
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


class Blob:
    """A random layer in a file (made once, pushed with curl, never read by the script again)."""

    def __init__(self, workdir, size):
        self.path = tempfile.mktemp(prefix="layer-", dir=workdir)
        h = hashlib.sha256()
        with open(self.path, "wb") as f:
            left = size
            while left:
                piece = os.urandom(min(8 * MiB, left))
                h.update(piece)
                f.write(piece)
                left -= len(piece)
        self.size = size
        self.hex = h.hexdigest()
        self.digest = "sha256:" + self.hex

    def remove(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


def http_request(url, method, path, body=None, headers=None, timeout=60):
    """path None: url is the whole target (an upload Location with its query)."""
    u = urllib.parse.urlsplit(url)
    if path is None:
        path = u.path + ("?" + u.query if u.query else "")
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        conn.close()


def upload_url(server_url, repo):
    status, headers, body = http_request(server_url, "POST", f"/v2/{repo}/blobs/uploads/",
                                         headers={"Content-Length": "0"})
    if status != 202:
        raise RuntimeError(f"POST upload to {server_url}/v2/{repo}: {status} {body[:200]!r}")
    return urllib.parse.urljoin(server_url + "/", headers["location"])


def with_digest(url, digest):
    return url + ("&" if "?" in url else "?") + "digest=" + urllib.parse.quote(digest)


def push_image(server_url, repo, tag, blob):
    """Layer (curl -T from the file), a small config and an OCI manifest, with plain HTTP."""
    loc = upload_url(server_url, repo)
    p = subprocess.run(["curl", "-sS", "-f", "-o", "/dev/null", "-H", "Expect:", "-H",
                        "Content-Type: application/octet-stream", "-T", blob.path, with_digest(loc, blob.digest)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"PUT of the layer to {server_url}/v2/{repo}: {p.stderr.strip()}")
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [blob.digest]}}).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    status, _, body = http_request(with_digest(upload_url(server_url, repo), config_digest), "PUT", None,
                                   body=config, headers={"Content-Type": "application/octet-stream"})
    if status != 201:
        raise RuntimeError(f"PUT of the config to {server_url}/v2/{repo}: {status} {body[:200]!r}")
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": blob.digest, "size": blob.size}],
    }).encode()
    status, _, body = http_request(server_url, "PUT", f"/v2/{repo}/manifests/{tag}", body=manifest,
                                   headers={"Content-Type": OCI_MANIFEST})
    if status != 201:
        raise RuntimeError(f"PUT of the manifest {server_url}/v2/{repo}:{tag}: {status} {body[:200]!r}")
    return "sha256:" + hashlib.sha256(manifest).hexdigest()


class Image:
    """A new random single-layer image pushed into the upstream (and other plain registries)."""

    def __init__(self, args, workdir, name, targets):
        t0 = time.time()
        self.repo, self.tag = f"library/{name}", "v1"
        self.blob = Blob(workdir, args.size)
        for url in targets:
            self.manifest_digest = push_image(url, self.repo, self.tag, self.blob)
        self.blob.remove()
        log(f"  seeded {self.repo}:{self.tag}, layer {self.blob.digest[:19]}… "
            f"({self.blob.size / MiB:.0f} MiB) in {time.time() - t0:.1f} s")

    @property
    def digest(self):
        return self.blob.digest

    def path(self, what, query=""):
        ref = self.tag if what == "manifest" else self.blob.digest
        return f"/v2/{self.repo}/{'manifests' if what == 'manifest' else 'blobs'}/{ref}{query}"
