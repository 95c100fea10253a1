"""Images and blobs for the tests: random OCI images to push, and the blob files under a root.

Standard library only; part of `import berthtest as bt` (see berthtest.py).
"""

import gzip
import hashlib
import json
import os
import random
import subprocess

__all__ = ["OCI_MANIFEST", "OCI_CONFIG", "OCI_LAYER", "sha256_digest", "make_image", "image_of", "oci_layout", "tree", "blob_files",
           "evict_from_page_cache", "on_tmpfs", "COLD_BYTES", "file_sha256"]

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def make_image(layer_sizes=(1024,), rng=None):
    """A random OCI image: {"blobs": {digest: bytes}, "manifest": bytes, "digest": str, ...}."""
    rnd = rng or random
    return image_of([rnd.randbytes(n) if rng else os.urandom(n) for n in layer_sizes], nonce=rnd.getrandbits(64))


def diff_id(layer):
    """What a config's rootfs.diff_ids says of a layer: the digest of its uncompressed bytes. Random
    bytes that happen to begin with gzip's magic (1 in 65,536 layers) are taken as they are."""
    if layer[:2] == b"\x1f\x8b":
        try:
            return sha256_digest(gzip.decompress(layer))
        except (OSError, EOFError):
            pass
    return sha256_digest(layer)


def image_of(layers, arch="amd64", nonce=None):
    """An OCI image with these layers (bytes) and a config for linux/<arch>, as make_image returns it."""
    config = json.dumps({"architecture": arch, "os": "linux",
                         "nonce": random.getrandbits(64) if nonce is None else nonce,
                         "rootfs": {"type": "layers", "diff_ids": [diff_id(x) for x in layers]}}).encode()
    blobs = {sha256_digest(config): config}
    for layer in layers:
        blobs[sha256_digest(layer)] = layer
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config), "size": len(config)},
        "layers": [{"mediaType": OCI_LAYER, "digest": sha256_digest(x), "size": len(x)} for x in layers],
    }).encode()
    return {"blobs": blobs, "config": config, "layers": list(layers), "manifest": manifest,
            "digest": sha256_digest(manifest)}


# --------------------------------------------------------------------------- blob files on disk


def oci_layout(path, named):
    """Writes an OCI image layout at path (for berth import): {ref name (REPO:TAG): image from
    make_image}. Returns path."""
    entries = []
    for name, img in named.items():
        for digest, data in [*img["blobs"].items(), (img["digest"], img["manifest"])]:
            blob = os.path.join(path, "blobs", "sha256", digest.split(":")[1])
            os.makedirs(os.path.dirname(blob), exist_ok=True)
            with open(blob, "wb") as f:
                f.write(data)
        entries.append({"mediaType": OCI_MANIFEST, "digest": img["digest"], "size": len(img["manifest"]),
                        "annotations": {"org.opencontainers.image.ref.name": name}})
    with open(os.path.join(path, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion": "1.0.0"}')
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": entries}, f)
    return path


def tree(root):
    """{relative path: (size, sha256)} of every regular file under root (RocksDB files excluded
    from hashing, since its files change on their own)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if rel.startswith("meta" + os.sep):
                out[rel] = None
                continue
            try:
                with open(full, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            out[rel] = (len(data), hashlib.sha256(data).hexdigest())
    return out


def blob_files(root):
    """{hex: path} of every file under <root>/blobs/sha256."""
    base = os.path.join(root, "blobs", "sha256")
    out = {}
    for dirpath, _, files in os.walk(base):
        for name in files:
            out[name] = os.path.join(dirpath, name)
    return out


def evict_from_page_cache(path):
    """Drops a file's pages from the page cache, so the next read of it goes to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def on_tmpfs(path):
    """Whether path is on tmpfs, where page-cache eviction does nothing."""
    kind = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True, check=True)
    return kind.stdout.strip() == "tmpfs"


COLD_BYTES = "berth_blob_read_from_disk_bytes_total"


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
    return h.hexdigest()
