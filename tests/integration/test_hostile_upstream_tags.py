#!/usr/bin/env python3
"""A hostile upstream registry (hostile_upstream.py) against a real berth proxying it: tag lists:
empty, null, invalid or typed tags, hostile Link headers, pages that ignore `last`, nested, huge,
endless, silent and trickled lists.

The harness and what every test checks: tests/lib/hostile_case.py.
"""

import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import hostile_upstream as hu  # noqa: E402
from hostile_case import NESTED, NS, TWIN, HostileCase, fetch  # noqa: E402


class TagListTest(HostileCase):
    def test_tag_list_empty_null_or_invalid_with_link(self):
        link = ("Link", '</v2/whatever/tags/list?n=100&last=zzz>; rel="next"')
        variants = {
            # name: (body, expected tags or None for 404 NAME_UNKNOWN, or "either")
            "empty": ({"name": "x", "tags": []}, []),
            "null": ({"name": "x", "tags": None}, []),
            "invalid": ({"name": "x", "tags": [".hidden", "-dash", "a/b", "t" * 129, "", "sp ace", "caf\u00e9",
                                               "nul\u0000", "..", "x" * 5000]}, []),
            "missing": ({"name": "x"}, []),
            "partial": ({"name": "x", "tags": ["v1", ".bad", "v2", "-x"]}, ["v1", "v2"]),
            "types": ({"name": "x", "tags": [1, {}, None, [], True, 2.5]}, "either"),
            "string": ({"name": "x", "tags": "v1"}, "either"),
            "notjson": (b"<html>no tags here</html>", None),
            "array": (b'["v1", "v2"]', None),
            "evil-link": ({"name": "x", "tags": ["a"]}, ["a"]),
        }
        for name, (body, _) in variants.items():
            headers = [link] if name != "evil-link" else [("Link", '<http://169.254.169.254/v2/x/tags/list?last=a>; '
                                                                   'rel="next"')]
            self.up.on(rf"^/v2/library/tags-{name}/tags/list$", hu.json_answer(body, headers=headers))
        names = sorted(variants)

        def pull(i):
            name = names[i % len(names)]
            got = self.get_tags(f"library/tags-{name}", "&n=50")
            expected, what = variants[name][1], f"tag list {name}"
            self.assert_answered(got, what)
            if expected is None or (expected == "either" and got.status == 404):
                self.assertEqual((got.status, got.codes()), (404, ["NAME_UNKNOWN"]), f"{what}: {got}")
                return got
            self.assertEqual(got.status, 200, f"{what}: {got}")
            self.assertEqual(got.json()["tags"], [] if expected == "either" else expected, f"{what}: {got}")
            link_header = got.header("link")
            if not got.json()["tags"]:
                self.assertIsNone(link_header, f"{what}: a Link on an empty page")
            if link_header is not None:
                self.assertTrue(link_header.startswith(f"</v2/{NS}/library/tags-{name}/tags/list?"), link_header)
                self.assertNotIn("169.254", link_header)
            return got
        with self.while_hostile():
            self.hammer(pull, 2 * len(names), workers=10)
        # nothing of it stays: an honest upstream's list is what is served next
        self.up.add_tags("library/tags-empty", ["a", "b"])
        self.up.clear()
        got = self.get_tags("library/tags-empty")
        self.assertEqual((got.status, got.json() and got.json()["tags"]), (200, ["a", "b"]), got)

    def follow(self, repo, query, max_pages=50):
        """GETs a tag list and every Link after it; returns (pages, tags)."""
        path, pages, tags = f"/v2/{repo}/tags/list?ns={NS}{query}", 0, []
        while path and pages < max_pages:
            got = fetch(self.b.port, path)
            self.assert_answered(got, f"page {pages + 1} of {repo}")
            self.assertEqual(got.status, 200, got)
            pages += 1
            tags += got.json()["tags"]
            link = got.header("link")
            path = re.match(r"<([^>]+)>", link).group(1) if link else None
        return pages, tags

    def test_tag_list_ignoring_last_terminates(self):
        page = ("Link", '</v2/x/tags/list?n=2&last=e>; rel="next"')
        self.up.on(r"^/v2/library/sorted-\d+/tags/list$",
                   hu.json_answer({"name": "x", "tags": ["a", "b", "c", "d", "e"]}, headers=[page]))
        self.up.on(r"^/v2/library/unsorted-\d+/tags/list$",
                   hu.json_answer({"name": "x", "tags": ["e", "d", "c", "b", "a", "a", "e"]}, headers=[page]))

        def client(i):
            kind = ("sorted", "unsorted")[i % 2]
            for query in ("&n=2", "&n=3", ""):
                pages, tags = self.follow(f"library/{kind}-{i}", query)
                self.assertLessEqual(pages, 6, f"{kind}{query}: a client paged {pages} times through 5 tags")
                self.assertEqual(len(tags), len(set(tags)), f"{kind}{query}: a tag listed twice: {tags}")
                self.assertLessEqual(set(tags), set("abcde"))
                if kind == "sorted":
                    self.assertEqual(tags, list("abcde"), f"{kind}{query}")
            return pages
        with self.while_hostile():
            self.hammer(client, 8)

    def test_tag_list_nested_huge_and_endless(self):
        huge_tags = [f"t{i:07d}" for i in range(360_000)]  # about 4 MB, under the 4 MiB bound
        huge = json.dumps({"name": "x", "tags": huge_tags}, separators=(",", ":")).encode()
        self.assertLess(len(huge), 4 << 20)
        self.up.on(r"^/v2/library/nested-\d+/tags/list$", hu.json_answer(NESTED))
        self.up.on(r"^/v2/library/objects-\d+/tags/list$", hu.json_answer(b'{"tags":' * 500_000))
        self.up.on(r"^/v2/library/huge-\d+/tags/list$", hu.json_answer(huge))
        self.up.on(r"^/v2/library/endless-\d+/tags/list$", hu.firehose(
            hu.head_bytes(200, [("Content-Type", "application/json"), ("Connection", "close")]) +
            b'{"name":"x","tags":["', b't0000000","'))
        self.up.on(r"^/v2/library/silent-\d+/tags/list$", hu.silent())
        self.up.on(r"^/v2/library/trickle-\d+/tags/list$", hu.trickle_body(
            200, [("Content-Type", "application/json"), ("Content-Length", len(huge))], huge, 0.2, chunk=100))
        kinds = ("nested", "nested", "objects", "huge", "nested", "nested", "objects", "endless", "silent", "trickle")

        def pull(i):
            kind = kinds[i % len(kinds)]
            # the ones that time out on twin.test, whose address they make skipped
            got = self.get_tags(f"library/{kind}-{i}", "&n=100", ns=TWIN if kind in ("silent", "trickle") else NS)
            self.assert_answered(got, kind)
            if kind == "huge":
                self.assertEqual(got.status, 200, got)
                self.assertEqual(got.json()["tags"], huge_tags[:100])
            else:
                self.assertEqual((got.status, got.codes()), (404, ["NAME_UNKNOWN"]), f"{kind}: {got}")
            return got
        with self.while_hostile():
            self.hammer(pull, 2 * len(kinds))
            self.wait_upstream_released()


if __name__ == "__main__":
    unittest.main()
