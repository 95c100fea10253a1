"""referrers: the referrers API and OCI-Subject (spec: Content Discovery, Listing Referrers)."""

import json
import types

from ..checklist import MUST, SHOULD, check, fixture
from ..content import build_image, digest_of, index_manifest, rand_text, random_blob
from ..expect import error_codes, expect, expect_status
from ..fixtures import push_artifact, push_new_image
from ..media_types import BUNDLE, EARLY, OCI_INDEX, SBOM, SIGNATURE


@fixture
def referrers_content(s):
    """Subject S in repo 'ref' with five referrers; referrer Q pushed before its subject T;
    referrer X of S pushed to another repository."""
    repo, other = s.repo("ref"), s.repo("ref-other")
    subject = push_new_image(s, repo, "subject")
    r = types.SimpleNamespace(repo=repo, subject=subject.manifest, responses=[])

    def accepted(manifest, resp):
        expect_status(resp, 201)
        r.responses.append((resp, manifest))
        return manifest

    r.sbom_config = accepted(*push_artifact(s, repo, r.subject, config=random_blob(SBOM, size=48),
                                            annotations={"org.example.kind": "sbom-by-config"}))
    r.signature = accepted(*push_artifact(s, repo, r.subject, SIGNATURE,
                                          annotations={"org.example.kind": "signature"}))
    r.sbom_field = accepted(*push_artifact(s, repo, r.subject, SBOM,
                                           annotations={"org.example.kind": "sbom-by-field"}))
    r.typed_index = index_manifest([r.sbom_config, r.signature], artifactType=BUNDLE,
                                   subject=r.subject.descriptor(), annotations={"org.example.kind": "bundle"})
    accepted(r.typed_index, s.put_manifest(repo, r.typed_index.digest, r.typed_index))
    r.untyped_index = index_manifest([r.signature], subject=r.subject.descriptor(),
                                     annotations={"org.example.kind": "untyped-index"})
    accepted(r.untyped_index, s.put_manifest(repo, r.untyped_index.digest, r.untyped_index))
    r.expected = {
        r.sbom_config.digest: (r.sbom_config, SBOM, {"org.example.kind": "sbom-by-config"}),
        r.signature.digest: (r.signature, SIGNATURE, {"org.example.kind": "signature"}),
        r.sbom_field.digest: (r.sbom_field, SBOM, {"org.example.kind": "sbom-by-field"}),
        r.typed_index.digest: (r.typed_index, BUNDLE, {"org.example.kind": "bundle"}),
        r.untyped_index.digest: (r.untyped_index, None, {"org.example.kind": "untyped-index"}),
    }

    r.late_subject = build_image()
    r.early, r.early_resp = push_artifact(s, repo, r.late_subject.manifest, EARLY)
    r.foreign, foreign_resp = push_artifact(s, other, r.subject, SIGNATURE)
    expect_status(foreign_resp, 201)
    return r


@check("referrers", "subject-missing-accepted", MUST, "a manifest whose subject does not exist yet is accepted")
def referrers_subject_missing_accepted(s):
    r = s.need(referrers_content)
    expect_status(r.early_resp, 201)


@check("referrers", "oci-subject-header", MUST, "PUT of a manifest or index with a subject returns OCI-Subject: <subject digest>")
def referrers_oci_subject_header(s):
    r = s.need(referrers_content)
    for resp, manifest in r.responses + [(r.early_resp, r.early)]:
        want = json.loads(manifest.data)["subject"]["digest"]
        expect(resp.header("OCI-Subject") == want,
               f"PUT {manifest.media_type}: OCI-Subject is {resp.header('OCI-Subject')!r}, want {want}")


@check("referrers", "list", MUST, "GET /referrers/<digest> returns 200, Content-Type image index, and exactly the referrers")
def referrers_list(s):
    r = s.need(referrers_content)
    resp, descs = s.referrers(r.repo, r.subject.digest)
    expect(resp.header("Content-Type") == OCI_INDEX, f"Content-Type is {resp.header('Content-Type')!r}")
    doc = resp.json()
    expect(doc.get("schemaVersion") == 2 and doc.get("mediaType") == OCI_INDEX,
           f"not an image index: schemaVersion {doc.get('schemaVersion')}, mediaType {doc.get('mediaType')}")
    got = sorted(d.get("digest") for d in descs)
    expect(got == sorted(r.expected), f"listed {len(got)} referrers, expected {len(r.expected)}: {got}")


@check("referrers", "descriptors", MUST, "referrer descriptors carry the correct mediaType, digest and size")
def referrers_descriptors(s):
    r = s.need(referrers_content)
    _, descs = s.referrers(r.repo, r.subject.digest)
    expect(descs, "no referrers listed")
    for d in descs:
        manifest = r.expected.get(d.get("digest"), (None,))[0]
        expect(manifest, f"unexpected referrer {d.get('digest')}")
        expect(d.get("mediaType") == manifest.media_type and d.get("size") == manifest.size,
               f"{d.get('digest')}: mediaType {d.get('mediaType')}, size {d.get('size')}")


@check("referrers", "artifact-type", MUST, "artifactType comes from the manifest, else its config mediaType, and is omitted for an untyped index")
def referrers_artifact_type(s):
    r = s.need(referrers_content)
    _, descs = s.referrers(r.repo, r.subject.digest)
    expect(descs, "no referrers listed")
    for d in descs:
        _, artifact_type, _ = r.expected.get(d.get("digest"), (None, None, None))
        if artifact_type is None:
            expect("artifactType" not in d, f"untyped index has artifactType {d.get('artifactType')!r}")
        else:
            expect(d.get("artifactType") == artifact_type,
                   f"{d.get('digest')}: artifactType {d.get('artifactType')!r}, want {artifact_type}")


@check("referrers", "annotations", MUST, "referrer descriptors carry exactly the manifest's annotations")
def referrers_annotations(s):
    r = s.need(referrers_content)
    _, descs = s.referrers(r.repo, r.subject.digest)
    expect(descs, "no referrers listed")
    for d in descs:
        _, _, annotations = r.expected.get(d.get("digest"), (None, None, None))
        expect(d.get("annotations") == annotations, f"{d.get('digest')}: annotations {d.get('annotations')}")


@check("referrers", "none", MUST, "GET /referrers of a digest without referrers returns 200 and an empty index")
def referrers_none(s):
    r = s.need(referrers_content)
    resp, descs = s.referrers(r.repo, digest_of(b"hello world"))
    expect(resp.header("Content-Type") == OCI_INDEX, f"Content-Type is {resp.header('Content-Type')!r}")
    expect(descs == [], f"listed {descs}")


@check("referrers", "empty-repo", MUST, "GET /referrers in a repository never pushed to returns 200 and an empty OCI index (official suite)")
def referrers_empty_repo(s):
    resp, descs = s.referrers(s.repo("never-created"), digest_of(rand_text().encode()))
    doc = resp.json()
    expect(resp.header("Content-Type") == OCI_INDEX, f"Content-Type is {resp.header('Content-Type')!r}")
    expect(doc.get("schemaVersion") == 2 and doc.get("mediaType") == OCI_INDEX,
           f"not an image index: schemaVersion {doc.get('schemaVersion')}, mediaType {doc.get('mediaType')}")
    expect(descs == [], f"listed {descs}")


@check("referrers", "filter", SHOULD, "?artifactType= filters the referrers list")
def referrers_filter(s):
    r = s.need(referrers_content)
    _, descs = s.referrers(r.repo, r.subject.digest, artifactType=SBOM)
    got = sorted(d.get("digest") for d in descs)
    expect(got == sorted([r.sbom_config.digest, r.sbom_field.digest]), f"filter returned {len(got)} referrers")


@check("referrers", "filter-header", MUST, "a filtered response has OCI-Filters-Applied: artifactType; an unfiltered one does not")
def referrers_filter_header(s):
    r = s.need(referrers_content)
    resp, descs = s.referrers(r.repo, r.subject.digest, artifactType=SBOM)
    filtered = all(d.get("artifactType") == SBOM for d in descs) and len(descs) < len(r.expected)
    applied = resp.header("OCI-Filters-Applied")
    if filtered:
        expect(applied == "artifactType", f"filter applied but OCI-Filters-Applied is {applied!r}")
    else:
        expect(applied is None, f"OCI-Filters-Applied {applied!r} but the list is not filtered")
    resp, _ = s.referrers(r.repo, r.subject.digest)
    expect(resp.header("OCI-Filters-Applied") is None, "OCI-Filters-Applied on an unfiltered request")


@check("referrers", "before-subject", MUST, "a referrer pushed before its subject is listed, before and after the subject is pushed")
def referrers_before_subject(s):
    r = s.need(referrers_content)
    _, descs = s.referrers(r.repo, r.late_subject.manifest.digest)
    expect([d.get("digest") for d in descs] == [r.early.digest], f"before subject push: {descs}")
    s.push_image(r.repo, r.late_subject, "late")
    _, descs = s.referrers(r.repo, r.late_subject.manifest.digest)
    expect([d.get("digest") for d in descs] == [r.early.digest], f"after subject push: {descs}")
    expect(descs[0].get("artifactType") == EARLY, f"artifactType {descs[0].get('artifactType')!r}")


@check("referrers", "repository-scoped", MUST, "referrers pushed to another repository are not listed")
def referrers_repository_scoped(s):
    r = s.need(referrers_content)
    _, descs = s.referrers(r.repo, r.subject.digest)
    expect(r.foreign.digest not in [d.get("digest") for d in descs], "a referrer from another repository is listed")


@check("referrers", "invalid-digest", MUST, "GET /referrers/<malformed digest> returns 400")
def referrers_invalid_digest(s):
    r = s.need(referrers_content)
    resp = s.get(f"/v2/{r.repo}/referrers/sha256:not-a-digest")
    expect_status(resp, 400)
    error_codes(resp)
