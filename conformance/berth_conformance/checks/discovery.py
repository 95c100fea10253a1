"""discovery: listing tags (spec: Content Discovery, Listing Tags)."""

import random

from ..checklist import EXT, MUST, check, fixture
from ..client import next_link
from ..content import build_image
from ..expect import Skipped, error_codes, expect, expect_status


TAGS = ["0.9", "1.0", "alpha", "beta", "delta", "gamma", "latest"]


@fixture
def tagged_repo(s):
    repo, image = s.repo("tags"), build_image()
    s.push_image(repo, image, *random.sample(TAGS, len(TAGS)))
    return repo


@check("discovery", "tags-list", MUST, "GET /tags/list returns 200 with {name, tags} listing every tag")
def discovery_tags_list(s):
    repo = s.need(tagged_repo)
    resp, tags = s.tags(repo)
    expect(resp.json().get("name") == repo, f"name is {resp.json().get('name')!r}")
    expect(sorted(tags) == TAGS, f"tags are {tags}")


@check("discovery", "tags-sorted", MUST, "tags are returned in lexical order")
def discovery_tags_sorted(s):
    _, tags = s.tags(s.need(tagged_repo))
    expect(tags == sorted(tags, key=str.lower), f"tags are {tags}")


@check("discovery", "tags-n", MUST, "?n=3 returns exactly the first 3 tags")
def discovery_tags_n(s):
    resp, tags = s.tags(s.need(tagged_repo), n=3)
    expect(tags == TAGS[:3] or (tags == TAGS[:len(tags)] and resp.header("Link")),
           f"got {tags}, expected {TAGS[:3]}")


@check("discovery", "tags-n-last", MUST, "?n=2&last=<tag> returns the 2 tags following <tag>")
def discovery_tags_n_last(s):
    _, tags = s.tags(s.need(tagged_repo), n=2, last=TAGS[1])
    expect(tags == TAGS[2:4], f"got {tags}, expected {TAGS[2:4]}")


@check("discovery", "tags-last", MUST, "?last=<tag> without n returns all tags after <tag>")
def discovery_tags_last(s):
    _, tags = s.tags(s.need(tagged_repo), last=TAGS[4])
    expect(tags == TAGS[5:], f"got {tags}, expected {TAGS[5:]}")


@check("discovery", "tags-n-zero", MUST, "?n=0 returns an empty list and no Link header")
def discovery_tags_n_zero(s):
    resp, tags = s.tags(s.need(tagged_repo), n=0)
    expect(tags == [], f"got {tags}")
    expect(resp.header("Link") is None, f"Link header present: {resp.header('Link')}")


@check("discovery", "tags-link", EXT, 'a truncated page carries Link: <...>; rel="next" (MAY)')
def discovery_tags_link(s):
    resp, _ = s.tags(s.need(tagged_repo), n=3)
    expect(next_link(resp), "no Link header on a truncated page")


@check("discovery", "tags-link-walk", MUST, "following Link headers visits every tag once, in order, ending without Link")
def discovery_tags_link_walk(s):
    resp, seen = s.tags(s.need(tagged_repo), n=3)
    url = next_link(resp)
    if not url:
        raise Skipped("no Link header")
    for _ in range(len(TAGS)):
        if not url:
            break
        resp = s.get(url)
        expect_status(resp, 200)
        seen += resp.json().get("tags") or []
        url = next_link(resp)
    expect(seen == TAGS and url is None, f"walk yielded {seen}")


@check("discovery", "tags-unknown-repo", MUST, "GET /tags/list of a nonexistent repository returns 404")
def discovery_tags_unknown_repo(s):
    resp = s.get(f"/v2/{s.repo('never-created')}/tags/list")
    expect_status(resp, 404)
    error_codes(resp)
