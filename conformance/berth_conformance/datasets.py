"""Content shaped like the rewritten official suite's data sets (DataSet), and its opt-in sparse set."""

import base64
import gzip
import io
import json
import os
import random
import tarfile

from .content import Content, digest_of, rand_text
from .media_types import OCI_CONFIG, OCI_EMPTY, OCI_INDEX, OCI_LAYER, OCI_LAYER_TAR, OCI_MANIFEST


EXAMPLE_V1 = "application/vnd.example.oci.conformance.v1"
EXAMPLE_V2 = "application/vnd.example.oci.conformance.v2"
AMD64 = {"architecture": "amd64", "os": "linux"}
ARM64 = {"architecture": "arm64", "os": "linux"}
CONFORMANCE_ANNOTATION = {"org.opencontainers.conformance": "hello conformance test"}


def tar_layer(n):
    """An uncompressed tar holding one small file, like the official suite's layers."""
    text = (f"Conformance test file contents for file number {n}.\n"
            f"Todays lucky number is {random.getrandbits(63)}\n").encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo(f"./conformance-{n}.txt")
        info.size, info.mode = len(text), 0o644
        tar.addfile(info, io.BytesIO(text))
    return buf.getvalue()


def artifact(artifact_type=EXAMPLE_V1, layer_media_type=EXAMPLE_V1, layer_bytes=None):
    """Options for DataSet.image/index_full making the official suite's artifacts: the empty
    config {} and one layer of an artifact media type."""
    return {"artifact_type": artifact_type, "config_media_type": OCI_EMPTY, "config_bytes": b"{}",
            "layer_count": 1, "layer_media_type": layer_media_type, "layer_bytes": layer_bytes}


class DataSet:
    """Content shaped like one of the official suite's data sets, kept in the order it pushes it:
    every blob, then every manifest by digest (children before parents, subjects before their
    referrers), then the tags. Manifests are compact JSON, as Go marshals them."""

    def __init__(self, alg="sha256", data_field=False, extra_field=False):
        self.alg = alg
        self.data_field = data_field    # every descriptor carries its content in `data`
        self.extra_field = extra_field  # configs and manifests carry a random unknown field
        self.blobs = {}                 # digest -> Content, all pushed
        self.manifests = []             # Content, pushed by digest in this order
        self.tags = {}                  # tag -> Content
        self.referrers = {}             # subject digest -> expected referrer descriptors
        self.absent = []                # descriptors deliberately never pushed
        self.tag_param = False          # tags go in ?tag= on the digest PUT
        self.bad_digest = None          # the manifest whose bytes no longer match its digest

    def desc(self, content, **extra):
        if self.data_field:
            extra["data"] = base64.b64encode(content.data).decode()
        return content.descriptor(**extra)

    def encode(self, doc):
        if self.extra_field:
            doc[f"org.{rand_text()}"] = rand_text()
        return json.dumps(doc, separators=(",", ":")).encode()

    def add_blob(self, data, media_type):
        blob = Content(data, media_type, self.alg)
        self.blobs[blob.digest] = blob
        return blob

    def layer(self, n, compress=True):
        """A tar layer, gzipped or not: its blob and its diff_id."""
        tar = tar_layer(n)
        blob = self.add_blob(gzip.compress(tar, mtime=0), OCI_LAYER) if compress else self.add_blob(tar, OCI_LAYER_TAR)
        return blob, digest_of(tar, self.alg)

    def config(self, platform, diff_ids):
        doc = {"author": "OCI Conformance Test", **platform, "rootfs": {"type": "layers", "diff_ids": diff_ids}}
        return self.add_blob(self.encode(doc), OCI_CONFIG)

    def add_manifest(self, doc, referrer_type, tag):
        manifest = Content(self.encode(doc), doc["mediaType"], self.alg)
        self.manifests.append(manifest)
        if "subject" in doc:
            desc = manifest.descriptor(annotations=doc.get("annotations"))
            if referrer_type:
                desc["artifactType"] = referrer_type
            self.referrers.setdefault(doc["subject"]["digest"], []).append(desc)
        if tag:
            self.tags[tag] = manifest
        return manifest

    def top_fields(self, doc, subject, annotations, unique_annotation):
        if subject:
            doc["subject"] = subject
        annotations = dict(annotations or {})
        if unique_annotation:
            annotations[f"org.example.{rand_text()}"] = rand_text()
        if annotations:
            doc["annotations"] = annotations
        return doc

    def manifest(self, config_desc, layer_descs, artifact_type=None, subject=None, annotations=None,
                 unique_annotation=False, tag=None):
        doc = {"schemaVersion": 2, "mediaType": OCI_MANIFEST}
        if artifact_type:
            doc["artifactType"] = artifact_type
        doc.update(config=config_desc, layers=layer_descs)
        self.top_fields(doc, subject, annotations, unique_annotation)
        return self.add_manifest(doc, artifact_type or config_desc["mediaType"], tag)

    def image(self, platform=AMD64, layer_count=2, compress=True, config_media_type=None, config_bytes=None,
              layer_media_type=None, layer_bytes=None, **manifest_fields):
        """An image (tar layers, image config) or, with artifact(), an artifact."""
        layers, diff_ids = [], []
        for n in range(layer_count):
            if layer_media_type is None:
                blob, diff_id = self.layer(n, compress)
            else:
                blob = self.add_blob(os.urandom(2048) if layer_bytes is None else layer_bytes, layer_media_type)
                diff_id = blob.digest
            layers.append(self.desc(blob))
            diff_ids.append(diff_id)
        config = (self.config(platform, diff_ids) if config_media_type is None
                  else self.add_blob(config_bytes, config_media_type))
        return self.manifest(self.desc(config), layers, **manifest_fields)

    def index(self, children, artifact_type=None, subject=None, annotations=None, unique_annotation=False, tag=None):
        """children: (Content or descriptor, platform or None) pairs."""
        doc = {"schemaVersion": 2, "mediaType": OCI_INDEX}
        if artifact_type:
            doc["artifactType"] = artifact_type
        doc["manifests"] = []
        for child, platform in children:
            desc = dict(child) if isinstance(child, dict) else self.desc(child)
            if platform:
                desc["platform"] = platform
            doc["manifests"].append(desc)
        self.top_fields(doc, subject, annotations, unique_annotation)
        return self.add_manifest(doc, artifact_type, tag)

    def index_full(self, platforms=(AMD64, ARM64), **fields):
        """An index of one image per platform. Like the official generator, the children get the
        same artifactType, subject, annotations and tag as the index (the index takes the tag last)."""
        index_keys = ("artifact_type", "subject", "annotations", "unique_annotation", "tag")
        children = [self.image(platform=p, **fields) for p in platforms]
        return self.index(list(zip(children, platforms)), **{k: v for k, v in fields.items() if k in index_keys})


# The official suite's opt-in sparse data set (OCI_DATA_SPARSE): content deliberately never pushed.
# The sparse checks run it with --sparse; manifests.sparse-accepted-or-refused pushes it in every run.

def sparse_image_set():
    """An image of two layers, the first never pushed."""
    ds = DataSet()
    image = ds.image(tag="sparse-image")
    first = json.loads(image.data)["layers"][0]
    del ds.blobs[first["digest"]]
    ds.absent.append(first)
    return ds


def sparse_index_set():
    """An index of a pushed amd64 image and an arm64 image manifest that was never pushed."""
    ds = DataSet()
    image = ds.image(platform=AMD64)
    missing = {"mediaType": OCI_MANIFEST, "digest": digest_of(os.urandom(1024)), "size": 1024}
    ds.index([(image, AMD64), (missing, ARM64)], tag="sparse-index")
    ds.absent.append(missing)
    return ds
