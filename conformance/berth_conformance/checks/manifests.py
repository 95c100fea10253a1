"""manifests: pushing manifests, indexes and artifacts (spec: Pushing Manifests)."""

import base64
import json
import os

from ..checklist import EXT, MUST, SHOULD, check
from ..client import ACCEPT_OCI, blobs, location, manifests, oci_tags
from ..content import (
    Content, build_image, config_blob, digest_of, document, empty_config, image_manifest, index_manifest,
    rand_name, random_blob)
from ..datasets import sparse_image_set, sparse_index_set
from ..expect import Skipped, error_codes, expect, expect_4xx, expect_code, expect_status
from ..fixtures import manifest_repo, push_new_image
from ..media_types import (
    DOCKER_CONFIG, DOCKER_LAYER, DOCKER_LIST, DOCKER_MANIFEST, EMPTY_JSON_DIGEST, OCI_INDEX, OCI_MANIFEST)


@check("manifests", "put-tag", MUST, "PUT manifest by tag returns 201 with a pullable Location")
def manifests_put_tag(s):
    m = s.need(manifest_repo)
    resp = s.put_manifest(m.repo, "v1", m.image.manifest)
    expect_status(resp, 201)
    got = s.get(location(resp), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == m.image.manifest.data, "Location does not serve the pushed manifest")
    s.state["put-tag"] = resp


@check("manifests", "put-digest-header", SHOULD, "PUT manifest response carries Docker-Content-Digest equal to its digest")
def manifests_put_digest_header(s):
    m = s.need(manifest_repo)
    resp = s.requires("put-tag")
    expect(resp.header("Docker-Content-Digest") == m.image.manifest.digest,
           f"Docker-Content-Digest is {resp.header('Docker-Content-Digest')}")


@check("manifests", "put-digest", MUST, "PUT manifest by digest returns 201; Docker-Content-Digest, if any, equals it")
def manifests_put_digest(s):
    m = s.need(manifest_repo)
    image = build_image()
    for blob in image.blobs:
        s.upload_blob(m.repo, blob)
    resp = s.put_manifest(m.repo, image.manifest.digest, image.manifest)
    expect_status(resp, 201)
    location(resp)
    dcd = resp.header("Docker-Content-Digest")
    expect(dcd in (None, image.manifest.digest), f"Docker-Content-Digest {dcd} differs from the pushed digest")
    got = s.get(manifests(m.repo, image.manifest.digest), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == image.manifest.data, "body differs")


@check("manifests", "exact-bytes", MUST, "a manifest is stored and served in the exact byte representation pushed")
def manifests_exact_bytes(s):
    m = s.need(manifest_repo)
    doc = {"layers": [layer.descriptor() for layer in m.image.layers], "config": m.image.config.descriptor(),
           "mediaType": OCI_MANIFEST, "schemaVersion": 2}
    odd = Content((" " + json.dumps(doc, separators=(" ,", ":  ")) + "\n\n").encode(), OCI_MANIFEST)
    expect_status(s.put_manifest(m.repo, "odd-bytes", odd), 201)
    for ref in ("odd-bytes", odd.digest):
        got = s.get(manifests(m.repo, ref), headers={"Accept": OCI_MANIFEST})
        expect_status(got, 200)
        expect(got.body == odd.data, f"GET {ref}: bytes were re-encoded")


@check("manifests", "many-tags", MUST, "the same manifest can be pushed under several tags, each 201 + Location (official suite)")
def manifests_many_tags(s):
    m = s.need(manifest_repo)
    for i in range(4):
        resp = s.put_manifest(m.repo, f"test{i}", m.image.manifest)
        expect_status(resp, 201)
        location(resp)


@check("manifests", "retag", MUST, "pushing a different manifest to an existing tag moves the tag")
def manifests_retag(s):
    m = s.need(manifest_repo)
    first = push_new_image(s, m.repo, "moving")
    second = push_new_image(s, m.repo, "moving")
    got = s.get(manifests(m.repo, "moving"), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == second.manifest.data, "tag still points at the old manifest")
    expect_status(s.get(manifests(m.repo, first.manifest.digest), headers={"Accept": OCI_MANIFEST}), 200)


@check("manifests", "empty-layers", MUST, "a manifest with no layers and no mediaType field is accepted (official suite)")
def manifests_empty_layers(s):
    m = s.need(manifest_repo)
    doc = {"schemaVersion": 2, "config": m.image.config.descriptor(), "layers": []}
    manifest = document(doc, OCI_MANIFEST)
    resp = s.put_manifest(m.repo, "emptylayer", manifest)
    expect_status(resp, 201)
    location(resp)
    expect_status(s.get(manifests(m.repo, manifest.digest), headers={"Accept": OCI_MANIFEST}), 200)


@check("manifests", "unknown-fields", MUST, "descriptors with data, annotations, unknown and null fields are accepted verbatim")
def manifests_unknown_fields(s):
    m = s.need(manifest_repo)
    config = m.image.config
    doc = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
           "config": config.descriptor(data=base64.b64encode(config.data).decode(),
                                       newUnspecifiedField=base64.b64encode(b"hello world").decode()),
           "layers": [m.image.layers[0].descriptor(newUnspecifiedField=None, annotations={"org.example.layer": "x"})],
           "annotations": {"org.opencontainers.image.created": "2024-01-01T00:00:00Z"},
           "futureTopLevelField": {"nested": [1, 2, None]}}
    manifest = document(doc)
    expect_status(s.put_manifest(m.repo, "unknown-fields", manifest), 201)
    got = s.get(manifests(m.repo, "unknown-fields"), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == manifest.data, "body differs")


@check("manifests", "content-type-params", SHOULD, "parameters on the PUT Content-Type are ignored and not echoed on GET")
def manifests_content_type_params(s):
    m = s.need(manifest_repo)
    image = push_new_image(s, m.repo)
    manifest = image_manifest(image.config, image.layers, annotations={"n": rand_name()})
    expect_status(s.put_manifest(m.repo, "ct-params", manifest,
                                 content_type=OCI_MANIFEST + "; charset=utf-8"), 201)
    got = s.get(manifests(m.repo, "ct-params"), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.header("Content-Type") == OCI_MANIFEST, f"Content-Type is {got.header('Content-Type')!r}")


@check("manifests", "invalid-json", MUST, "PUT of a body that is not a manifest returns 4xx")
def manifests_invalid_json(s):
    m = s.need(manifest_repo)
    expect_4xx(s.put_manifest(m.repo, "garbage", Content(b"blablabla", OCI_MANIFEST)))
    expect_status(s.get(manifests(m.repo, "garbage")), 404)


@check("manifests", "invalid-schema", MUST, "PUT of an OCI manifest with schemaVersion 1 or without config returns 4xx")
def manifests_invalid_schema(s):
    m = s.need(manifest_repo)
    good = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": m.image.config.descriptor(), "layers": []}
    for what, broken in (("schemaVersion 1", {**good, "schemaVersion": 1}),
                         ("no config", {k: v for k, v in good.items() if k != "config"})):
        resp = s.put_manifest(m.repo, "broken", document(broken))
        expect(400 <= resp.status < 500, f"{what}: expected 4xx, got {resp.summary()}")
        error_codes(resp)


@check("manifests", "missing-blob-code", MUST, "a manifest rejected for missing blobs fails with MANIFEST_BLOB_UNKNOWN")
def manifests_missing_blob_code(s):
    m = s.need(manifest_repo)
    manifest = image_manifest(m.image.config, [random_blob()])
    resp = s.put_manifest(m.repo, "missing-blob", manifest)
    s.state["missing-blob"] = resp
    if resp.status == 201:
        raise Skipped("registry accepts manifests with missing blobs (MAY)")
    expect_4xx(resp)
    expect_code(resp, "MANIFEST_BLOB_UNKNOWN")


@check("manifests", "missing-blob-rejected", EXT, "berth rejects a manifest whose layer blob is missing")
def manifests_missing_blob_rejected(s):
    if s.sparse:
        raise Skipped("--sparse: the registry is expected to accept it")
    resp = s.requires("missing-blob")
    expect(400 <= resp.status < 500, f"got {resp.summary()}")


@check("manifests", "digest-mismatch", MUST, "PUT manifest to a digest that does not match the body returns 4xx")
def manifests_digest_mismatch(s):
    m = s.need(manifest_repo)
    resp = s.put_manifest(m.repo, digest_of(os.urandom(32)), m.image.manifest)
    expect_4xx(resp)
    s.state["manifest-digest-mismatch"] = resp


@check("manifests", "tag-max-length", MUST, "a tag of exactly 128 characters is accepted")
def manifests_tag_max_length(s):
    m = s.need(manifest_repo)
    tag = "t" + rand_name(127)
    expect_status(s.put_manifest(m.repo, tag, m.image.manifest), 201)
    expect_status(s.get(manifests(m.repo, tag), headers={"Accept": OCI_MANIFEST}), 200)


@check("manifests", "tag-too-long", MUST, "PUT manifest with a 129-character tag returns 4xx")
def manifests_tag_too_long(s):
    m = s.need(manifest_repo)
    resp = s.put_manifest(m.repo, "t" + rand_name(128), m.image.manifest)
    expect_4xx(resp)
    s.state["tag-too-long"] = resp


@check("manifests", "tag-invalid-chars", MUST, "PUT manifest with tags not matching [a-zA-Z0-9_][a-zA-Z0-9._-]* returns 4xx")
def manifests_tag_invalid_chars(s):
    m = s.need(manifest_repo)
    for tag in ("-leading-dash", ".leading-dot", "plus+sign"):
        expect_4xx(s.put_manifest(m.repo, tag, m.image.manifest))


@check("manifests", "large-manifest", SHOULD, "a manifest of about 4 MB is accepted")
def manifests_large_manifest(s):
    m = s.need(manifest_repo)
    filler = "x" * (4_000_000 - 1000)
    manifest = image_manifest(m.image.config, m.image.layers, annotations={"org.example.filler": filler})
    expect_status(s.put_manifest(m.repo, "large", manifest), 201)
    got = s.get(manifests(m.repo, "large"), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == manifest.data, "body differs")


@check("manifests", "too-large", SHOULD, "a 16 MiB manifest is refused with 413 Payload Too Large")
def manifests_too_large(s):
    m = s.need(manifest_repo)
    filler = "x" * (16 << 20)
    manifest = image_manifest(m.image.config, m.image.layers, annotations={"org.example.filler": filler})
    expect_status(s.put_manifest(m.repo, "too-large", manifest), 413)


@check("manifests", "image-index", MUST, "an OCI image index referencing pushed manifests round-trips with its media type")
def manifests_image_index(s):
    m = s.need(manifest_repo)
    amd64, arm64 = push_new_image(s, m.repo), push_new_image(s, m.repo)
    doc = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        amd64.manifest.descriptor(platform={"architecture": "amd64", "os": "linux"}),
        arm64.manifest.descriptor(platform={"architecture": "arm64", "os": "linux", "variant": "v8"})]}
    index = document(doc)
    expect_status(s.put_manifest(m.repo, "multiarch", index), 201)
    got = s.get(manifests(m.repo, "multiarch"), headers={"Accept": f"{OCI_MANIFEST}, {OCI_INDEX}"})
    expect_status(got, 200)
    expect(got.body == index.data, "body differs")
    expect(got.header("Content-Type") == OCI_INDEX, f"Content-Type is {got.header('Content-Type')!r}")


@check("manifests", "index-missing-child", MUST, "an index rejected for an unknown child manifest fails with MANIFEST_BLOB_UNKNOWN")
def manifests_index_missing_child(s):
    m = s.need(manifest_repo)
    index = index_manifest([build_image().manifest])
    resp = s.put_manifest(m.repo, "dangling-index", index)
    if resp.status == 201:
        raise Skipped("registry accepts indexes with unknown children (MAY)")
    expect_4xx(resp)
    expect_code(resp, "MANIFEST_BLOB_UNKNOWN")


@check("manifests", "sparse-accepted-or-refused", MUST, "the official sparse image (a layer never pushed) and sparse "
       "index (a child never pushed) are accepted, or refused with 4xx MANIFEST_BLOB_UNKNOWN (spec)")
def manifests_sparse_accepted_or_refused(s):
    repo, answers = s.repo("sparse-default"), {}
    for what, ds in (("sparse image", sparse_image_set()), ("sparse index", sparse_index_set())):
        for blob in ds.blobs.values():
            s.upload_blob(repo, blob)
        *children, top = ds.manifests
        for child in children:
            s.push_manifest(repo, child.digest, child)
        resp = s.put_manifest(repo, top.digest, top)
        answers[what] = resp
        if resp.status != 201:
            expect(400 <= resp.status < 500, f"{what}: expected 201 or 4xx, got {resp.summary()}")
            expect_code(resp, "MANIFEST_BLOB_UNKNOWN")
    s.state["sparse-default"] = answers


@check("manifests", "sparse-refused", EXT, "berth without sparse_manifests refuses the sparse image and index with 400 "
       "MANIFEST_BLOB_UNKNOWN")
def manifests_sparse_refused(s):
    if s.sparse:
        raise Skipped("--sparse: the registry is expected to accept them")
    for what, resp in s.requires("sparse-default").items():
        expect(resp.status == 400, f"{what}: expected 400, got {resp.summary()}")
        expect_code(resp, "MANIFEST_BLOB_UNKNOWN")


@check("manifests", "put-malformed-digest", MUST, "PUT manifest to 'sha256:baddigeststring' returns 400; GET of it 400 or 404 (official suite)")
def manifests_put_malformed_digest(s):
    m = s.need(manifest_repo)
    resp = s.put_manifest(m.repo, "sha256:baddigeststring", m.image.manifest, chunked=True)
    expect_status(resp, 400)
    error_codes(resp)
    expect_status(s.get(manifests(m.repo, "sha256:baddigeststring"), headers=ACCEPT_OCI), 400, 404)


@check("manifests", "docker-v2", SHOULD, "a Docker schema2 manifest round-trips with its media type")
def manifests_docker_v2(s):
    m = s.need(manifest_repo)
    config, layer = config_blob(DOCKER_CONFIG), random_blob(DOCKER_LAYER)
    for blob in (config, layer):
        s.upload_blob(m.repo, blob)
    manifest = image_manifest(config, [layer], media_type=DOCKER_MANIFEST)
    expect_status(s.put_manifest(m.repo, "docker", manifest), 201)
    got = s.get(manifests(m.repo, "docker"), headers={"Accept": DOCKER_MANIFEST})
    expect_status(got, 200)
    expect(got.body == manifest.data, "body differs")
    expect(got.header("Content-Type") == DOCKER_MANIFEST, f"Content-Type is {got.header('Content-Type')!r}")
    s.state["docker-v2"] = manifest


@check("manifests", "docker-list", SHOULD, "a Docker manifest list round-trips with its media type")
def manifests_docker_list(s):
    m = s.need(manifest_repo)
    child = s.requires("docker-v2")
    doc = {"schemaVersion": 2, "mediaType": DOCKER_LIST,
           "manifests": [child.descriptor(platform={"architecture": "amd64", "os": "linux"})]}
    manifest = document(doc)
    expect_status(s.put_manifest(m.repo, "docker-list", manifest), 201)
    got = s.get(manifests(m.repo, "docker-list"), headers={"Accept": f"{DOCKER_LIST}, {DOCKER_MANIFEST}"})
    expect_status(got, 200)
    expect(got.body == manifest.data, "body differs")
    expect(got.header("Content-Type") == DOCKER_LIST, f"Content-Type is {got.header('Content-Type')!r}")


@check("manifests", "artifact-empty-config", MUST, "an artifact with artifactType and the empty config {} is accepted and served")
def manifests_artifact_empty_config(s):
    m = s.need(manifest_repo)
    config, layer = empty_config(), random_blob("application/vnd.example.payload")
    expect(config.digest == EMPTY_JSON_DIGEST, "internal: wrong empty JSON digest")
    for blob in (config, layer):
        s.upload_blob(m.repo, blob)
    manifest = image_manifest(config, [layer], artifactType="application/vnd.example.thing.v1")
    expect_status(s.put_manifest(m.repo, "artifact", manifest), 201)
    got = s.get(manifests(m.repo, "artifact"), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == manifest.data, "body differs")
    got = s.get(blobs(m.repo, EMPTY_JSON_DIGEST))
    expect_status(got, 200)
    expect(got.body == b"{}", "empty config blob differs")


@check("manifests", "custom-media-types", MUST, "unknown config and layer media types (e.g. buildkit cache) are accepted")
def manifests_custom_media_types(s):
    m = s.need(manifest_repo)
    config = config_blob("application/vnd.buildkit.cacheconfig.v0")
    layers = [random_blob("application/vnd.oci.image.layer.v1.tar+zstd"), random_blob("application/octet-stream")]
    for blob in (config, *layers):
        s.upload_blob(m.repo, blob)
    manifest = image_manifest(config, layers)
    expect_status(s.put_manifest(m.repo, "buildcache", manifest), 201)
    got = s.get(manifests(m.repo, "buildcache"), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == manifest.data, "body differs")


@check("manifests", "sha512", SHOULD, "a manifest of sha512 blobs pushed by its sha512 digest is pullable by it")
def manifests_sha512(s):
    m = s.need(manifest_repo)
    config, layer = config_blob(alg="sha512"), random_blob(alg="sha512")
    for blob in (config, layer):
        s.upload_blob(m.repo, blob)
    manifest = image_manifest(config, [layer], alg="sha512")
    expect_status(s.put_manifest(m.repo, manifest.digest, manifest), 201)
    got = s.get(manifests(m.repo, manifest.digest), headers={"Accept": OCI_MANIFEST})
    expect_status(got, 200)
    expect(got.body == manifest.data, "body differs")


@check("manifests", "tag-query", EXT, "PUT manifest by digest with ?tag=a&tag=b&tag=c creates all three tags (spec main, MAY)")
def manifests_tag_query(s):
    m = s.need(manifest_repo)
    image = build_image()
    for blob in image.blobs:
        s.upload_blob(m.repo, blob)
    tags = ["multi-1", "multi-2", "multi-latest"]
    resp = s.put_manifest(m.repo, image.manifest.digest, image.manifest, params=[("tag", t) for t in tags])
    expect_status(resp, 201)
    created = [t for t in tags
               if s.get(manifests(m.repo, t), headers={"Accept": OCI_MANIFEST}).body == image.manifest.data]
    if created:
        s.state["tag-query"] = (resp, created)
    expect(created == tags, f"tags created: {created}")


@check("manifests", "tag-query-header", MUST, "each tag created via ?tag= is listed in an OCI-Tag response header (spec main)")
def manifests_tag_query_header(s):
    resp, created = s.requires("tag-query")
    listed = oci_tags(resp)
    expect(set(created) <= listed, f"OCI-Tag lists {sorted(listed)}, tags created {created}")
