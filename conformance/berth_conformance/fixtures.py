"""Fixtures and pushes that checks of several categories share."""

import types

from .checklist import fixture
from .content import build_image, empty_config, image_manifest, rand_name, random_blob


@fixture
def pull_content(s):
    """A tagged two-layer image and one pushed by digest only (pull, blob_api and errors checks)."""
    repo = s.repo("pull")
    tagged, by_digest = build_image(layer_count=2), build_image()
    s.push_image(repo, tagged, "latest")
    s.push_image(repo, by_digest)
    return types.SimpleNamespace(repo=repo, tagged=tagged, by_digest=by_digest)


@fixture
def manifest_repo(s):
    """A repository holding an image's blobs, not its manifest (manifests and errors checks)."""
    repo, image = s.repo("manifests"), build_image()
    for blob in image.blobs:
        s.upload_blob(repo, blob)
    return types.SimpleNamespace(repo=repo, image=image)


def push_new_image(s, repo, ref=None, **fields):
    """A new image, its blobs and its manifest pushed (to `ref`, else by digest)."""
    image = build_image(**fields)
    s.push_image(repo, image, ref or image.manifest.digest)
    return image


def push_artifact(s, repo, subject, artifact_type=None, config=None, annotations=None):
    """An image manifest with a subject; artifactType set, or conveyed by the config media type.
    The subject descriptor carries an unknown null field, like the official suite's."""
    config = config or empty_config()
    layer = random_blob("application/vnd.example.payload")
    for blob in (config, layer):
        s.upload_blob(repo, blob)
    fields = {"subject": subject.descriptor(newUnspecifiedField=None),
              "annotations": annotations or {"org.example.id": rand_name()}}
    if artifact_type:
        fields["artifactType"] = artifact_type
    manifest = image_manifest(config, [layer], **fields)
    return manifest, s.put_manifest(repo, manifest.digest, manifest)
