"""catalog (berth extension): /v2/_catalog."""

from ..checklist import EXT, check, fixture
from ..client import next_link
from ..expect import expect, expect_status
from ..fixtures import push_new_image


@fixture
def catalog_repos(s):
    names = [s.repo("cat-a"), s.repo("cat-b")]
    for name in names:
        push_new_image(s, name, "latest")
    return names


@check("catalog", "list", EXT, "GET /v2/_catalog lists repositories (following Link pages) in lexical order")
def catalog_list(s):
    names = s.need(catalog_repos)
    url, seen = s.client.url("/v2/_catalog", {"n": 1000}), []
    for _ in range(1000):
        resp = s.get(url)
        expect_status(resp, 200)
        seen += resp.json().get("repositories") or []
        url = next_link(resp)
        if not url:
            break
    expect(set(names) <= set(seen), f"{names} not all listed")
    expect(seen == sorted(seen), "repositories are not in lexical order")


@check("catalog", "n", EXT, "GET /v2/_catalog?n=1 returns one repository and a Link to the next page")
def catalog_n(s):
    s.need(catalog_repos)
    resp = s.get("/v2/_catalog", params={"n": 1})
    expect_status(resp, 200)
    expect(len(resp.json().get("repositories") or []) == 1, f"got {resp.snippet()!r}")
    expect(next_link(resp), "no Link header")


@check("catalog", "last", EXT, "GET /v2/_catalog?n=1&last=<repo> returns the following repository")
def catalog_last(s):
    first, second = s.need(catalog_repos)
    resp = s.get("/v2/_catalog", params={"n": 1, "last": first})
    expect_status(resp, 200)
    expect(resp.json().get("repositories") == [second], f"got {resp.snippet()!r}")
