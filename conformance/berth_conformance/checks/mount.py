"""push: cross-repository blob mounts (spec: Mounting a blob from another repository)."""

import os
import types
import urllib.parse

from ..checklist import EXT, MUST, SHOULD, check, fixture
from ..client import blobs, location, uploads
from ..content import digest_of, random_blob
from ..expect import expect, expect_status


@fixture
def mount_source(s):
    repo, blob = s.repo("mount-src"), random_blob()
    s.upload_blob(repo, blob)
    return types.SimpleNamespace(repo=repo, blob=blob)


@check("push", "mount-no-from", MUST, "POST ?mount=<unknown digest> without from returns 202 and a session Location (official suite)")
def push_mount_no_from(s):
    resp = s.request("POST", uploads(s.crossmount), params={"mount": digest_of(os.urandom(16))})
    expect_status(resp, 202)
    location(resp)


@check("push", "mount-from", MUST, "POST ?mount=&from= of an existing blob returns 201 (mounted) or 202 (session)")
def push_mount_from(s):
    src = s.need(mount_source)
    resp = s.request("POST", uploads(s.crossmount), params={"mount": src.blob.digest, "from": src.repo})
    expect_status(resp, 201, 202)
    s.state["mount"] = (resp, location(resp))


@check("push", "mount-created", EXT, "berth mounts across repositories: 201, Location /v2/<name>/blobs/<digest>, blob pullable")
def push_mount_created(s):
    src = s.need(mount_source)
    resp, loc = s.requires("mount")
    expect_status(resp, 201)
    want = blobs(s.crossmount, src.blob.digest)
    expect(urllib.parse.urlsplit(loc).path == want, f"Location {resp.header('Location')!r}, the official suite wants {want}")
    got = s.get(loc)
    expect_status(got, 200)
    expect(got.body == src.blob.data, "mounted blob differs")


@check("push", "mount-missing-blob", SHOULD, "POST ?mount=&from= of a blob the source lacks returns 202 and a usable session")
def push_mount_missing_blob(s):
    src, blob = s.need(mount_source), random_blob()
    resp = s.request("POST", uploads(s.crossmount), params={"mount": blob.digest, "from": src.repo})
    expect_status(resp, 202)
    loc = location(resp)
    prefix = uploads(s.crossmount)
    expect(urllib.parse.urlsplit(loc).path.startswith(prefix), f"Location {loc!r} is not under {prefix}")
    expect_status(s.put_blob(loc, blob), 201)


@check("push", "mount-without-from", MUST, "POST ?mount=<existing digest> without from returns 201 (mounted) or 202 (session)")
def push_mount_without_from(s):
    src = s.need(mount_source)
    repo = s.repo("mount-auto")
    resp = s.request("POST", uploads(repo), params={"mount": src.blob.digest})
    expect_status(resp, 201, 202)
    loc = location(resp)
    if resp.status == 201:
        got = s.get(loc)
        expect_status(got, 200)
        expect(got.body == src.blob.data, "mounted blob differs")
