"""management: deleting tags, manifests and blobs (spec: Content Management)."""

import os
import types

from ..checklist import EXT, MUST, SHOULD, check, fixture
from ..client import blobs, manifests
from ..content import digest_of, random_blob
from ..expect import error_codes, expect, expect_code, expect_status
from ..fixtures import push_artifact, push_new_image
from ..media_types import OCI_MANIFEST, SIGNATURE


@fixture
def management_content(s):
    repo = s.repo("mgmt")
    kept = push_new_image(s, repo, "keep")
    s.push_manifest(repo, "gone", kept.manifest)
    victim = push_new_image(s, repo, "victim")
    s.push_manifest(repo, "victim-2", victim.manifest)
    referrer, resp = push_artifact(s, repo, kept.manifest, SIGNATURE)
    expect_status(resp, 201)
    loose = random_blob()
    s.upload_blob(repo, loose)
    shared = random_blob()
    s.upload_blob(repo, shared)
    s.upload_blob(s.repo("mgmt-other"), shared)
    return types.SimpleNamespace(repo=repo, kept=kept.manifest, victim=victim.manifest, victim_config=victim.config,
                                 referrer=referrer, loose=loose, shared=shared)


@check("management", "delete-tag", MUST, "DELETE /manifests/<tag> returns 202, or 400 UNSUPPORTED / 405 if tag deletion is disabled")
def management_delete_tag(s):
    mg = s.need(management_content)
    resp = s.delete(manifests(mg.repo, "gone"))
    s.state["tag-delete"] = resp
    expect_status(resp, 202, 400, 405)
    if resp.status == 400:  # the official suite requires UNSUPPORTED here
        expect_code(resp, "UNSUPPORTED")
    if resp.status == 202:
        s.state["tag-deleted"] = True


@check("management", "delete-tag-supported", EXT, "berth implements tag deletion (202)")
def management_delete_tag_supported(s):
    resp = s.requires("tag-delete")
    expect_status(resp, 202)


@check("management", "deleted-tag-404", MUST, "after tag deletion GET /manifests/<tag> returns 404")
def management_deleted_tag_404(s):
    mg = s.need(management_content)
    s.requires("tag-deleted")
    expect_status(s.get(manifests(mg.repo, "gone")), 404)


@check("management", "deleted-tag-manifest-kept", SHOULD, "deleting a tag leaves the manifest and its other tags in place")
def management_deleted_tag_manifest_kept(s):
    mg = s.need(management_content)
    s.requires("tag-deleted")
    expect_status(s.get(manifests(mg.repo, mg.kept.digest), headers={"Accept": OCI_MANIFEST}), 200)
    expect_status(s.get(manifests(mg.repo, "keep"), headers={"Accept": OCI_MANIFEST}), 200)


@check("management", "deleted-tag-unlisted", MUST, "a deleted tag disappears from /tags/list")
def management_deleted_tag_unlisted(s):
    mg = s.need(management_content)
    s.requires("tag-deleted")
    _, tags = s.tags(mg.repo)
    expect("gone" not in tags and "keep" in tags, f"tags are {tags}")


@check("management", "delete-manifest", MUST, "DELETE /manifests/<digest> returns 202")
def management_delete_manifest(s):
    mg = s.need(management_content)
    expect_status(s.delete(manifests(mg.repo, mg.victim.digest)), 202)
    s.state["manifest-deleted"] = True


@check("management", "deleted-manifest-404", MUST, "after deletion GET/HEAD by digest and by every tag of it return 404")
def management_deleted_manifest_404(s):
    mg = s.need(management_content)
    s.requires("manifest-deleted")
    for ref in (mg.victim.digest, "victim", "victim-2"):
        expect_status(s.get(manifests(mg.repo, ref)), 404)
        expect_status(s.head(manifests(mg.repo, ref)), 404)


@check("management", "deleted-manifest-tags-unlisted", MUST, "tags of a deleted manifest disappear from /tags/list (official suite)")
def management_deleted_manifest_tags_unlisted(s):
    mg = s.need(management_content)
    s.requires("manifest-deleted")
    _, tags = s.tags(mg.repo)
    expect(not {"victim", "victim-2"} & set(tags), f"tags are {tags}")


@check("management", "delete-manifest-again", MUST, "DELETE of an already deleted manifest returns 404")
def management_delete_manifest_again(s):
    mg = s.need(management_content)
    s.requires("manifest-deleted")
    resp = s.delete(manifests(mg.repo, mg.victim.digest))
    expect_status(resp, 404)
    error_codes(resp)


@check("management", "delete-manifest-unknown-repo", MUST, "DELETE /manifests/<digest> in a nonexistent repository returns 404")
def management_delete_manifest_unknown_repo(s):
    expect_status(s.delete(manifests(s.repo("never-created"), digest_of(os.urandom(8)))), 404)


@check("management", "delete-referrer", MUST, "a deleted referrer disappears from the referrers list")
def management_delete_referrer(s):
    mg = s.need(management_content)
    _, before = s.referrers(mg.repo, mg.kept.digest)
    expect([d.get("digest") for d in before] == [mg.referrer.digest], f"referrers before delete: {before}")
    expect_status(s.delete(manifests(mg.repo, mg.referrer.digest)), 202)
    _, after = s.referrers(mg.repo, mg.kept.digest)
    expect(after == [], f"referrers after delete: {after}")


@check("management", "delete-blob", MUST, "DELETE /blobs/<digest> of a loose blob and of a deleted manifest's config returns 202")
def management_delete_blob(s):
    mg = s.need(management_content)
    expect_status(s.delete(blobs(mg.repo, mg.loose.digest)), 202)
    s.state["blob-deleted"] = [mg.loose]
    s.requires("manifest-deleted")
    expect_status(s.delete(blobs(mg.repo, mg.victim_config.digest)), 202)
    s.state["blob-deleted"].append(mg.victim_config)


@check("management", "deleted-blob-404", MUST, "after deletion GET and HEAD of the blob return 404")
def management_deleted_blob_404(s):
    mg = s.need(management_content)
    for blob in s.requires("blob-deleted"):
        expect_status(s.get(blobs(mg.repo, blob.digest)), 404)
        expect_status(s.head(blobs(mg.repo, blob.digest)), 404)


@check("management", "delete-blob-unknown", MUST, "DELETE of an unknown blob returns 404")
def management_delete_blob_unknown(s):
    mg = s.need(management_content)
    resp = s.delete(blobs(mg.repo, digest_of(os.urandom(8))))
    expect_status(resp, 404)
    error_codes(resp)


@check("management", "delete-blob-repository-scoped", SHOULD, "deleting a blob in one repository leaves it in another")
def management_delete_blob_repository_scoped(s):
    mg = s.need(management_content)
    expect_status(s.delete(blobs(mg.repo, mg.shared.digest)), 202)
    expect_status(s.get(blobs(mg.repo, mg.shared.digest)), 404)
    got = s.get(blobs(s.repo("mgmt-other"), mg.shared.digest))
    expect_status(got, 200)
    expect(got.body == mg.shared.data, "blob in the other repository differs")
