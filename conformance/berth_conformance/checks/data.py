"""data: the rewritten official suite's data sets, one check each."""

import os

from ..checklist import EXT, MUST, SHOULD, check
from ..content import digest_of
from ..data_steps import run_data_set
from ..datasets import AMD64, CONFORMANCE_ANNOTATION, DataSet, EXAMPLE_V2, artifact
from ..media_types import OCI_EMPTY, OCI_LAYER_ND, OCI_LAYER_ND_GZ, OCI_MANIFEST


def data_set(name, level, title):
    """Register a check running the data set its function builds."""
    def register(build):
        check("data", name, level, f"{title} (official suite)")(lambda s: run_data_set(s, build()))
        return build
    return register


@data_set("image", MUST, "image with two gzip tar layers, tagged")
def data_image():
    ds = DataSet()
    ds.image(tag="image")
    return ds


@data_set("image-uncompressed", MUST, "image with uncompressed tar layers (…layer.v1.tar)")
def data_image_uncompressed():
    ds = DataSet()
    ds.image(tag="image-uncompressed", compress=False)
    return ds


@data_set("large-manifest", SHOULD, "image manifest of ~3.9 MB: 390 annotations of 10000 characters")
def data_large_manifest():
    ds = DataSet()
    ds.image(tag="large-manifest", annotations={f"large-annotation-{i}": "A" * 10000 for i in range(390)})
    return ds


@data_set("index", MUST, "image index of an amd64 and an arm64 image")
def data_index():
    ds = DataSet()
    ds.index_full(tag="index")
    return ds


@data_set("nested-index", MUST, "index of two image indexes (no platform)")
def data_nested_index():
    ds = DataSet()
    first, second = ds.index_full(), ds.index_full()
    ds.index([(first, None), (second, None)], tag="index-of-index")
    return ds


@data_set("empty-index", MUST, "image index with an empty manifests list")
def data_empty_index():
    ds = DataSet()
    ds.index_full(platforms=(), tag="index")
    return ds


@data_set("artifact", MUST, "artifact: artifactType, empty config {}, one layer of an example media type")
def data_artifact():
    ds = DataSet()
    ds.image(tag="artifact", **artifact())
    return ds


@data_set("artifact-index", MUST, "index with an artifactType, of two artifacts with platforms")
def data_artifact_index():
    ds = DataSet()
    ds.index_full(tag="artifact-index", **artifact())
    return ds


@data_set("artifact-without-layers", MUST, "artifact whose only layer is the empty JSON blob {}")
def data_artifact_without_layers():
    ds = DataSet()
    ds.image(tag="artifact-without-layers", **artifact(layer_media_type=OCI_EMPTY, layer_bytes=b"{}"))
    return ds


@data_set("artifacts-with-subject", MUST, "an image and three referrers to it (an image, two tagged artifacts); "
          "referrers listed and filtered")
def data_artifacts_with_subject():
    ds = DataSet()
    subject = ds.image(tag="image").descriptor()
    ds.image(subject=subject)
    ds.image(subject=subject, annotations=CONFORMANCE_ANNOTATION, unique_annotation=True, tag="tagged-artifact1",
             **artifact())
    ds.image(subject=subject, annotations=CONFORMANCE_ANNOTATION, unique_annotation=True, tag="tagged-artifact2",
             **artifact(artifact_type=EXAMPLE_V2, layer_media_type="application/octet-stream"))
    return ds


@data_set("index-with-subject", MUST, "an index, and an artifact index whose children and itself refer to it")
def data_index_with_subject():
    ds = DataSet()
    subject = ds.index_full(tag="index").descriptor()
    ds.index_full(subject=subject, annotations=CONFORMANCE_ANNOTATION, unique_annotation=True, tag="tagged-artifact",
                  **artifact())
    return ds


@data_set("missing-subject", MUST, "tagged artifact whose subject was never pushed; listed as its referrer")
def data_missing_subject():
    ds = DataSet()
    subject = {"mediaType": OCI_MANIFEST, "digest": digest_of(b"missing content"), "size": 123}
    ds.image(subject=subject, annotations=CONFORMANCE_ANNOTATION, unique_annotation=True, tag="tagged-artifact",
             **artifact())
    return ds


@data_set("data-field", MUST, "image whose config and layer descriptors carry their content in `data`")
def data_data_field():
    ds = DataSet(data_field=True)
    ds.image(tag="data-field")
    return ds


@data_set("non-distributable-layers", MUST, "image with nondistributable .tar+gzip and .tar layers (with urls) "
          "that are never pushed, and one normal layer")
def data_non_distributable_layers():
    ds = DataSet()
    foreign = []
    for media_type, size in ((OCI_LAYER_ND_GZ, 123456), (OCI_LAYER_ND, 12345)):
        digest = digest_of(os.urandom(256))
        foreign.append({"mediaType": media_type, "digest": digest, "size": size,
                        "urls": [f"https://store.example.com/blobs/sha256/{digest.split(':')[1]}"]})
    layer, diff_id = ds.layer(1)
    config = ds.config(AMD64, [digest_of(os.urandom(256)), foreign[1]["digest"], diff_id])
    ds.manifest(ds.desc(config), [*foreign, ds.desc(layer)], tag="non-distributable-image")
    ds.absent += foreign
    return ds


@data_set("custom-fields", MUST, "index, manifests and configs with an unknown top-level field")
def data_custom_fields():
    ds = DataSet(extra_field=True)
    ds.index_full(tag="custom-fields")
    return ds


@data_set("no-layers", MUST, "image manifest with an empty layers list")
def data_no_layers():
    ds = DataSet()
    ds.image(tag="no-layers", layer_count=0)
    return ds


@data_set("sha512", SHOULD, "index, images, configs and layers all addressed by sha512, pushed by digest")
def data_sha512():
    ds = DataSet(alg="sha512")
    ds.index_full()
    return ds


def tag_param_data_set(alg):
    ds = DataSet(alg=alg)
    ds.index_full(tag=f"tag-param-{alg}")
    for i, manifest in enumerate(ds.manifests):
        ds.tags[f"tag-param-{alg}-{i}"] = manifest
    ds.tag_param = True
    return ds


@data_set("tag-param-sha256", EXT, "index and its images pushed by digest with ?tag= (two tags on the index); "
          "each tag in OCI-Tag (spec main, MAY)")
def data_tag_param_sha256():
    return tag_param_data_set("sha256")


@data_set("tag-param-sha512", EXT, "the same with sha512 digests, which can only be tagged through ?tag= "
          "(spec main, MAY)")
def data_tag_param_sha512():
    return tag_param_data_set("sha512")


@data_set("bad-digest-image", MUST, "image whose manifest PUT by digest has two bytes more than the digest covers: 400")
def data_bad_digest_image():
    ds = DataSet()
    ds.bad_digest = ds.image()
    ds.bad_digest.data += b"  "
    return ds
