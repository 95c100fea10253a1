"""Generated content: digests, random names, blobs, configs, manifests and indexes."""

import base64
import hashlib
import json
import os
import random
import string
import types

from .media_types import OCI_CONFIG, OCI_EMPTY, OCI_INDEX, OCI_LAYER, OCI_MANIFEST


def digest_of(data, alg="sha256"):
    return f"{alg}:{hashlib.new(alg, data).hexdigest()}"


def digest_matches(value, data):
    """Whether `value` is a digest (in any supported algorithm) of `data`."""
    alg, _, _ = (value or "").partition(":")
    return alg in ("sha256", "sha512") and value == digest_of(data, alg)


def rand_name(n=10):
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(n))


def rand_text():
    """26 random base32 characters, like Go's crypto/rand.Text."""
    return base64.b32encode(os.urandom(16)).decode().rstrip("=")


class Content:
    """A blob or manifest: bytes plus the descriptor fields that address them."""

    def __init__(self, data, media_type, alg="sha256"):
        self.data, self.media_type = data, media_type
        self.digest, self.size = digest_of(data, alg), len(data)

    def descriptor(self, **extra):
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size, **extra}


def random_blob(media_type=OCI_LAYER, size=None, alg="sha256"):
    return Content(os.urandom(size if size is not None else random.randint(1024, 4096)), media_type, alg)


def config_blob(media_type=OCI_CONFIG, alg="sha256"):
    doc = {"architecture": "amd64", "os": "linux", "author": rand_name(16),
           "rootfs": {"type": "layers", "diff_ids": []}}
    return Content(json.dumps(doc, indent="\t").encode(), media_type, alg)


def empty_config():
    return Content(b"{}", OCI_EMPTY)


def document(doc, media_type=None, alg="sha256"):
    return Content(json.dumps(doc, indent=3).encode(), media_type or doc["mediaType"], alg)


def image_manifest(config, layers, media_type=OCI_MANIFEST, alg="sha256", **fields):
    doc = {"schemaVersion": 2, "mediaType": media_type, "config": config.descriptor(),
           "layers": [layer.descriptor() for layer in layers], **fields}
    return document(doc, alg=alg)


def index_manifest(children, media_type=OCI_INDEX, **fields):
    return document({"schemaVersion": 2, "mediaType": media_type,
                     "manifests": [c.descriptor() for c in children], **fields})


def build_image(layer_count=1, **fields):
    config = config_blob()
    layers = [random_blob() for _ in range(layer_count)]
    return types.SimpleNamespace(config=config, layers=layers, blobs=[config, *layers],
                                 manifest=image_manifest(config, layers, **fields))
