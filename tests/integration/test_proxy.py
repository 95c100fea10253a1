#!/usr/bin/env python3
"""Registry proxying (distribution-spec main, "Registry Proxying"): one berth mirroring real CNCF
Distribution registries (Debian's docker-registry) on loopback.

Upstreams of the berth under test (every one a real docker-registry; host = the `ns` value):
  docker.io      plain HTTP Distribution A (check interval 300 s, the default upstream)
  fast.test      A again, with a 2 s check interval (tag revalidation, stale answers)
  slow.test      A behind a pacing TCP relay (single flight, upstream killed mid-fetch)
  corrupt.test   A behind a relay that flips byte 100 of every response body
  narrow.test    A behind another pacing relay, max_concurrent 2
  flaky.test     A behind a relay that can answer 503 to everything (2 s check interval)
  auth.test      Distribution B (htpasswd Basic) with the right username/password_file
  noauth.test    B without credentials;  badpw.test  B with a wrong password
  tls.test       Distribution C (HTTPS, certificate from a CA made here) with ca_file
  insecure.test  C with insecure: true;   wrongca.test  C with another CA's ca_file

Covered: ns and prefixed names reach the same repository (OCI-Namespace header on manifests,
blobs, tags/list, referrers); unprefixed names go to local repositories first, then to
docker.io; pushes into docker.io/...; invalid ns values; fetch, verify and store on a miss
(corrupted upstream bytes never stored nor served whole); tag revalidation by one HEAD per
interval, digests never re-checked; the upstream killed (cached content served, misses 404
within a second), answering 503 (stale answers) or hung (answers within a bounded time); the
upstream killed mid-blob (nothing stored, no complete-looking answer, fetched again later);
the first reader of a fetch disconnecting; 16 concurrent GETs = one upstream GET;
max_concurrent; Basic and TLS upstreams; metrics and the access log's cache field. Limits on
fetched content, berth as the upstream of berth and bad proxy configuration, each on servers of
its own, are test_proxy_standalone.py's.

The relays are plain TCP relays in this process (distribution.Relay): they pace or corrupt what
the real Distribution sends, since loopback transfers finish before a test could act on them.

Skipped as a whole (exit 0) when /usr/bin/docker-registry is not installed. BERTH_KEEP=1 prints
berth's and the upstreams' logs of a failing test.
"""

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import distribution as dist  # noqa: E402
from proxycase import ACCEPT, ProxyTestCase  # noqa: E402

FAST_INTERVAL = 2  # check_interval_seconds of fast.test
MISS_DEADLINE = 1.0  # seconds a miss may take with the upstream down
FROZEN_DEADLINE = 7.0  # seconds the first answer may take with the upstream hung (its timeout is 5 s)


def metric(m, name, upstream):
    """Sum of a metric's series carrying upstream="..." (0 when there is none yet)."""
    label = f'upstream="{upstream}"'
    return sum(v for k, v in m.items() if (k == name or k.startswith(name + "{")) and label in k)


def access_lines(b, contains):
    return [x for x in b.log_lines() if x.get("msg") == "request" and contains in x.get("target", "")]


class ProxyTest(ProxyTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="berth-proxy-test-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        d = cls.tmp
        cls.a = dist.Distribution()
        cls.addClassCleanup(cls.a.cleanup)
        cls.a.start()
        cls.relay = dist.Relay(cls.a.port)
        cls.addClassCleanup(cls.relay.close)
        cls.corrupt = dist.Relay(cls.a.port, corrupt_offset=100)
        cls.addClassCleanup(cls.corrupt.close)
        cls.narrow = dist.Relay(cls.a.port)
        cls.addClassCleanup(cls.narrow.close)
        cls.flaky = dist.Relay(cls.a.port)
        cls.addClassCleanup(cls.flaky.close)
        cls.bdist = dist.Distribution(users={"alice": "alice-pw"})
        cls.addClassCleanup(cls.bdist.cleanup)
        cls.bdist.start()
        ca, ca_key = bt.make_ca(d)
        other_ca, _ = bt.make_ca(d, "other-ca")
        cert = bt.make_cert(d, "upstream", ca, ca_key)
        cls.c = dist.Distribution(tls=cert, ssl_context=dist.tls_context(ca))
        cls.addClassCleanup(cls.c.cleanup)
        cls.c.start()
        for name, text in (("alice.pw", "alice-pw\n"), ("wrong.pw", "not-alices-pw\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        cls.upstreams = [
            {"host": "docker.io", "url": cls.a.url},
            {"host": "fast.test", "url": cls.a.url, "check_interval_seconds": FAST_INTERVAL},
            {"host": "slow.test", "url": cls.relay.url},
            {"host": "corrupt.test", "url": cls.corrupt.url},
            {"host": "narrow.test", "url": cls.narrow.url, "max_concurrent": 2},
            {"host": "flaky.test", "url": cls.flaky.url, "check_interval_seconds": FAST_INTERVAL},
            {"host": "auth.test", "url": cls.bdist.url, "username": "alice",
             "password_file": os.path.join(d, "alice.pw")},
            {"host": "noauth.test", "url": cls.bdist.url},
            {"host": "badpw.test", "url": cls.bdist.url, "username": "alice",
             "password_file": os.path.join(d, "wrong.pw")},
            {"host": "tls.test", "url": cls.c.url, "ca_file": ca},
            {"host": "insecure.test", "url": cls.c.url, "insecure": True},
            {"host": "wrongca.test", "url": cls.c.url, "ca_file": other_ca},
        ]
        cls.b = bt.serve(cls.addClassCleanup, {"log": {"access": True}, "proxy": {"upstreams": cls.upstreams}})

    def setUp(self):
        self.addCleanup(self.print_logs_on_failure)

    def print_logs_on_failure(self):
        if bt.failed(self) or os.environ.get("BERTH_KEEP"):
            print(f"\n--- berth stderr (tail):\n{self.b.stderr()[-4000:]}\n--- upstream A log (tail):\n"
                  f"{self.a.log()[-3000:]}", file=sys.stderr)

    def ensure_upstream(self):
        """Bring A back (and unpace the relay) for the next test."""
        self.relay.set_rate(None)
        if not self.a.alive():
            self.a.restart()
        for ns in ("docker.io", "fast.test", "slow.test"):
            self.wait_reachable(ns)

    def wait_reachable(self, ns, timeout=10):
        """Poll until berth fetches a new manifest from A through ns again (after a failed connect
        berth leaves an upstream address alone for a moment); returns the seconds it took."""
        probe = self.a.push_image(f"library/probe-{os.urandom(4).hex()}", "v1", (10,))
        t = time.monotonic()

        def fetched():
            return self.b.get(f"/v2/{probe['repo']}/manifests/v1?ns={ns}", headers={"Accept": ACCEPT}).status == 200
        bt.poll(fetched, timeout, 0.1, f"berth to reach the upstream {ns} again")
        return time.monotonic() - t

    # ------------------------------------------------------------------ names

    def test_ns_and_prefixed_name_are_one_repository(self):
        b, a = self.b, self.a
        img = a.push_image("library/alpine", "3", (1500, 2500))
        r = self.pull(b, "library/alpine", "3", "?ns=docker.io", img, expect_ns="docker.io", what="ns")
        # HEAD with ns carries the header too
        h = b.head("/v2/library/alpine/manifests/3?ns=docker.io", headers={"Accept": ACCEPT})
        self.assertEqual((h.status, h.header("Docker-Content-Digest")), (200, img["digest"]), h)
        self.assertEqual(h.header("OCI-Namespace"), "docker.io")
        # the prefixed name is the same repository: same bytes, same digest, and no new fetch
        fetched = len(a.requests(contains="/v2/library/alpine/"))
        r2 = self.pull(b, "docker.io/library/alpine", "3", "", img, what="prefixed")
        self.assertEqual(r2.body, r.body)
        r3 = self.pull(b, "docker.io/library/alpine", img["digest"], "", img, what="prefixed by digest")
        self.assertEqual(r3.header("Docker-Content-Digest"), img["digest"])
        self.assertEqual(len(a.requests(contains="/v2/library/alpine/")), fetched,
                         "the prefixed name went to the upstream again")
        # tags/list by ns and by prefixed name
        for path, ns in (("/v2/library/alpine/tags/list?ns=docker.io", "docker.io"),
                         ("/v2/docker.io/library/alpine/tags/list", None)):
            t = b.get(path)
            self.assertEqual(t.status, 200, f"{path}: {t}")
            self.assertIn("3", t.json()["tags"], path)
            if ns:
                self.assertEqual(t.header("OCI-Namespace"), ns, path)
        # referrers by ns: an index (nothing refers to it)
        rr = b.get(f"/v2/library/alpine/referrers/{img['digest']}?ns=docker.io")
        self.assertEqual(rr.status, 200, rr)
        self.assertEqual(rr.header("OCI-Namespace"), "docker.io")
        self.assertEqual(rr.json()["manifests"], [])
        # stored locally under the prefixed name: in the catalog, blobs on berth's disk
        cat = b.get("/v2/_catalog?n=10000")
        self.assertEqual(cat.status, 200, cat)
        self.assertIn("docker.io/library/alpine", cat.json()["repositories"])
        files = bt.blob_files(b.root)
        for digest in img["blobs"]:
            self.assertIn(digest.split(":")[1], files, f"blob {digest} not stored")

    def test_unprefixed_names_local_first_then_docker_io(self):
        b, a = self.b, self.a
        # only upstream: goes to docker.io (the default upstream) and lands in docker.io/NAME
        up = a.push_image("library/mirror-only", "v1", (1200,))
        self.pull(b, "library/mirror-only", "v1", "", up, what="unprefixed, no ns")
        self.assertGreaterEqual(len(a.requests("GET", contains="/v2/library/mirror-only/manifests/")) +
                                len(a.requests("HEAD", contains="/v2/library/mirror-only/manifests/")), 1)
        self.pull(b, "docker.io/library/mirror-only", "v1", "", up, what="prefixed after an unprefixed pull")
        # a local repository is served locally and never asked upstream, even if the upstream has
        # a repository of that name with other content
        a.push_image("shadow/app", "v1", (900,))
        local = b.push_image("shadow/app", "v1", (800,))
        before = len(a.requests(contains="/v2/shadow/app/"))
        self.pull(b, "shadow/app", "v1", "", local, what="local repository")
        self.assertEqual(len(a.requests(contains="/v2/shadow/app/")), before,
                         "a local repository's pull went to the upstream")
        # a name nobody has: 404, after asking docker.io
        r = b.get("/v2/nobody/has-this/manifests/v1", headers={"Accept": ACCEPT})
        self.assertError(r, 404, "MANIFEST_UNKNOWN", "unknown unprefixed name")
        self.assertGreaterEqual(len(a.requests(contains="/v2/nobody/has-this/manifests/v1")), 1,
                                "an unknown unprefixed name was not asked at the default upstream")

    def test_push_into_upstream_names(self):
        b, a = self.b, self.a
        img = b.push_image("docker.io/library/airgap", "v1", (1000, 700))
        self.pull(b, "docker.io/library/airgap", "v1", "", img, what="pushed, prefixed")
        self.pull(b, "docker.io/library/airgap", img["digest"], "", img, what="pushed, by digest")
        self.pull(b, "library/airgap", img["digest"], "?ns=docker.io", img, expect_ns="docker.io",
                  what="pushed, ns, by digest")
        self.pull(b, "library/airgap", "v1", "?ns=docker.io", img, expect_ns="docker.io",
                  what="pushed, ns, by tag (the upstream has no such tag)")
        # a referrer pushed into the prefixed name is listed through ns
        empty = b"{}"
        b.push_blob("docker.io/library/airgap", empty)
        sig = json.dumps({"schemaVersion": 2, "mediaType": bt.OCI_MANIFEST, "artifactType": "application/x-test-sig",
                          "config": {"mediaType": "application/vnd.oci.empty.v1+json",
                                     "digest": bt.sha256_digest(empty), "size": 2},
                          "layers": [{"mediaType": "application/vnd.oci.empty.v1+json",
                                      "digest": bt.sha256_digest(empty), "size": 2}],
                          "subject": {"mediaType": bt.OCI_MANIFEST, "digest": img["digest"],
                                      "size": len(img["manifest"])}}).encode()
        r = b.put_manifest("docker.io/library/airgap", bt.sha256_digest(sig), sig)
        self.assertEqual(r.status, 201, r)
        rr = b.get(f"/v2/library/airgap/referrers/{img['digest']}?ns=docker.io")
        self.assertEqual(rr.status, 200, rr)
        self.assertEqual(rr.header("OCI-Namespace"), "docker.io")
        self.assertEqual([m["digest"] for m in rr.json()["manifests"]], [bt.sha256_digest(sig)])
        self.assertEqual(a.requests("PUT", contains="airgap"), [], "a push went to the upstream")

    def test_invalid_ns(self):
        b = self.b
        digest = bt.sha256_digest(b"x")
        for ns in ("..bad", "UPPER", "Docker.io", "a" * 256, "b." * 128, "bad_host", "-x.io", "a..b",
                   "docker.io/x", ""):
            for path in ("manifests/v1", f"blobs/{digest}", "tags/list", f"referrers/{digest}"):
                with self.subTest(ns=ns[:20], path=path):
                    if ns == "" and path != "manifests/v1":
                        continue
                    r = b.get(f"/v2/library/alpine/{path}?ns={dist.quote(ns)}", headers={"Accept": ACCEPT})
                    if ns == "":
                        # an empty ns is no ns at all or invalid; never a crash
                        self.assertIn(r.status, (200, 400, 404), r)
                        continue
                    self.assertError(r, 400, "NAME_INVALID", f"ns={ns[:30]!r} {path}")
        for ns in ("localhost:5000", "docker.io:443", "127.0.0.1:5000"):
            for path in ("manifests/v1", f"blobs/{digest}", "tags/list"):
                with self.subTest(ns=ns, path=path):
                    r = b.get(f"/v2/library/alpine/{path}?ns={dist.quote(ns)}", headers={"Accept": ACCEPT})
                    self.assertError(r, 404, "NAME_UNKNOWN", f"ns={ns} {path}")
        self.assertTrue(b.alive())

    def test_ns_of_an_unconfigured_host(self):
        # quay.io is no upstream: the local repository quay.io/library/alpine, which is not there
        r = self.b.get("/v2/library/alpine/manifests/3?ns=quay.io", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 404, r)
        self.assertIn(r.error_codes()[0], ("NAME_UNKNOWN", "MANIFEST_UNKNOWN"), r)
        # content pushed under that name is served by ns
        img = self.b.push_image("quay.io/team/tool", "v2", (500,))
        self.pull(self.b, "team/tool", "v2", "?ns=quay.io", img, expect_ns="quay.io", what="unconfigured ns")

    # ------------------------------------------------------------------ freshness

    def test_tag_revalidation_and_digests(self):
        b, a = self.b, self.a
        img1 = a.push_image("library/reval", "v1", (1100,))
        img2 = bt.make_image((1300,))
        for data in img2["blobs"].values():
            a.push_blob("library/reval", data)
        slow1 = a.push_image("library/reval300", "v1", (600,))
        slow2 = bt.make_image((650,))
        for data in slow2["blobs"].values():
            a.push_blob("library/reval300", data)
        manifests = "/v2/library/reval/manifests/"

        def upstream_manifest_requests():
            return [x for x in a.access_log() if x.path.startswith(manifests) and x.method in ("GET", "HEAD")]

        asked = time.monotonic()  # berth checks the tag after this (and before `checked`)
        self.pull(b, "library/reval", "v1", "?ns=fast.test", img1, expect_ns="fast.test", what="first")
        checked = time.monotonic()
        self.pull(b, "library/reval300", "v1", "?ns=docker.io", slow1, what="first (300 s interval)")
        seen = len(upstream_manifest_requests())
        for _ in range(3):
            self.pull(b, "library/reval", "v1", "?ns=fast.test", img1, what="within the interval")
        # the tag moves upstream; within the interval berth does not ask
        a.put_manifest("library/reval", "v1", img2["manifest"])
        a.put_manifest("library/reval300", "v1", slow2["manifest"])
        before = len(a.access_log())
        r = b.get(f"{manifests}v1?ns=fast.test", headers={"Accept": ACCEPT})
        within = time.monotonic() - checked < FAST_INTERVAL - 0.3
        if within:
            self.assertEqual(r.header("Docker-Content-Digest"), img1["digest"], "re-checked within the interval")
            self.assertEqual(upstream_manifest_requests()[seen:], [], "upstream asked within the interval")
        # Asked until the new manifest comes: the old one until the interval is over, then (after
        # one HEAD and a GET upstream) the new one.

        def moved():
            r = b.get(f"{manifests}v1?ns=fast.test", headers={"Accept": ACCEPT})
            self.assertEqual(r.status, 200, r)
            digest = r.header("Docker-Content-Digest")
            self.assertIn(digest, (img1["digest"], img2["digest"]), r)
            return digest == img2["digest"]
        bt.poll(moved, FAST_INTERVAL + 10, 0.1, "the moved tag once its check interval is over")
        self.assertGreaterEqual(time.monotonic() - asked, FAST_INTERVAL, "re-checked within the interval")
        self.pull(b, "library/reval", "v1", "?ns=fast.test", img2, expect_ns="fast.test", what="after the interval")
        new = [x for x in a.access_log()[before:] if x.path.startswith(manifests)]
        heads = [x for x in new if x.method == "HEAD"]
        self.assertEqual(len(heads), 1, f"upstream manifest requests after the interval: {new}")
        self.assertEqual(heads[0].path, f"{manifests}v1", new)
        self.assertLessEqual(len([x for x in new if x.method == "GET"]), 1, new)
        before = len(a.access_log())
        self.pull(b, "library/reval", "v1", "?ns=fast.test", img2, what="right after the re-check")
        # digests are never re-checked: the old manifest by digest, long past the interval
        self.pull(b, "library/reval", img1["digest"], "?ns=fast.test", img1, what="old digest")
        self.assertEqual([x for x in a.access_log()[before:] if x.path.startswith(manifests)], [],
                         "upstream asked for a digest or a freshly checked tag")
        # docker.io (300 s interval): still the first manifest, upstream not asked
        before = len(a.access_log())
        self.pull(b, "library/reval300", "v1", "?ns=docker.io", slow1, what="300 s interval, after 2 s")
        self.assertEqual([x for x in a.access_log()[before:] if "reval300" in x.path], [])
        # access log: fetched, then hit
        caches = [x.get("cache") for x in access_lines(b, f"{manifests}v1?ns=fast.test")]
        self.assertEqual(caches[0], "fetched", caches)
        self.assertIn("hit", caches[1:], caches)

    def test_upstream_down(self):
        b, a = self.b, self.a
        self.addCleanup(self.ensure_upstream)
        img = a.push_image("library/down", "v1", (2000, 3000))
        self.pull(b, "library/down", "v1", "?ns=docker.io", img, what="before the upstream dies")
        self.pull(b, "library/down", "v1", "?ns=fast.test", img, what="before the upstream dies (fast)")
        fetched = time.monotonic()
        errors_before = metric(b.metrics(), "berth_proxy_upstream_errors_total", "docker.io")
        a.kill()
        self.pull(b, "library/down", "v1", "?ns=docker.io", img, expect_ns="docker.io", what="upstream dead")
        self.pull(b, "docker.io/library/down", img["digest"], "", img, what="upstream dead, by digest")
        for ns, repo in (("docker.io", "library/never"), ("fast.test", "library/never2")):
            for path, code in ((f"/v2/{repo}/manifests/v1?ns={ns}", "MANIFEST_UNKNOWN"),
                               (f"/v2/{repo}/blobs/{bt.sha256_digest(os.urandom(8))}?ns={ns}", "BLOB_UNKNOWN")):
                t = time.monotonic()
                r = b.get(path, headers={"Accept": ACCEPT})
                took = time.monotonic() - t
                self.assertError(r, 404, code, f"miss with the upstream down: {path}")
                self.assertLess(took, MISS_DEADLINE, f"{path} took {took:.2f}s with the upstream down")
        # a tag past its check interval with the upstream down: served, marked stale
        time.sleep(max(0.0, fetched + FAST_INTERVAL + 0.3 - time.monotonic()))  # the interval itself
        stale_before = metric(b.metrics(), "berth_proxy_stale_total", "fast.test")
        t = time.monotonic()
        self.pull(b, "library/down", "v1", "?ns=fast.test", img, expect_ns="fast.test", what="stale")
        self.assertGreaterEqual(metric(b.metrics(), "berth_proxy_stale_total", "fast.test") - stale_before, 1)
        self.assertLess(time.monotonic() - t, 5 * MISS_DEADLINE, "a stale answer waited long for the upstream")
        stale = access_lines(b, "/v2/library/down/manifests/v1?ns=fast.test")
        self.assertEqual(stale[-1].get("cache"), "stale", stale[-1])
        hits = access_lines(b, "/v2/library/down/manifests/v1?ns=docker.io")
        self.assertEqual([x.get("cache") for x in hits], ["fetched", "hit"])
        errors = metric(b.metrics(), "berth_proxy_upstream_errors_total", "docker.io")
        self.assertGreater(errors, errors_before, "no upstream error counted with the upstream dead")
        # back up: new content is fetched again, within a few seconds
        a.restart()
        self.assertLess(self.wait_reachable("docker.io"), 5, "berth took long to use the upstream again")
        img2 = a.push_image("library/down", "v2", (700,))
        self.pull(b, "library/down", "v2", "?ns=docker.io", img2, what="upstream back")

    def test_tags_list_from_upstream_then_cache(self):
        # a mirror lists what the upstream has; with the upstream away, what is stored here
        b, a = self.b, self.a
        self.addCleanup(self.ensure_upstream)
        img = a.push_image("library/tagged", "v1", (500,))
        a.push_image("library/tagged", "v2", (600,))
        self.pull(b, "library/tagged", "v1", "?ns=docker.io", img, what="one tag pulled")
        r = b.get("/v2/library/tagged/tags/list?ns=docker.io")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header("OCI-Namespace"), "docker.io")
        self.assertEqual(sorted(r.json()["tags"]), ["v1", "v2"])
        r = b.get("/v2/docker.io/library/tagged/tags/list?n=1")
        self.assertEqual(r.json()["tags"], ["v1"])
        self.assertIn("rel=\"next\"", r.header("Link") or "", "a page of the upstream's list says more follow")
        a.kill()
        r = b.get("/v2/library/tagged/tags/list?ns=docker.io")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["tags"], ["v1"], "with the upstream away, the tags stored here")
        r = b.get("/v2/library/never-pulled/tags/list?ns=docker.io")
        self.assertError(r, 404, "NAME_UNKNOWN", "a repository neither here nor reachable upstream")

    def test_upstream_5xx(self):
        # an upstream answering 503: cached content is served (stale), a miss is 404
        b, a, relay = self.b, self.a, self.flaky
        self.addCleanup(relay.set_fail_status, None)
        img = a.push_image("library/flaky", "v1", (900,))
        self.pull(b, "library/flaky", "v1", "?ns=flaky.test", img, what="before the 503s")
        fetched = time.monotonic()
        relay.set_fail_status(503)
        time.sleep(max(0.0, fetched + FAST_INTERVAL + 0.3 - time.monotonic()))  # the interval itself
        stale_before = metric(b.metrics(), "berth_proxy_stale_total", "flaky.test")
        errors_before = metric(b.metrics(), "berth_proxy_upstream_errors_total", "flaky.test")
        self.pull(b, "library/flaky", "v1", "?ns=flaky.test", img, expect_ns="flaky.test", what="upstream 503")
        self.assertTrue(any("/v2/library/flaky/manifests/v1" in line for line in relay.failed),
                        f"berth did not ask the failing upstream: {relay.failed}")
        line = access_lines(b, "/v2/library/flaky/manifests/v1?ns=flaky.test")[-1]
        self.assertEqual(line.get("cache"), "stale", line)
        self.assertGreaterEqual(metric(b.metrics(), "berth_proxy_stale_total", "flaky.test") - stale_before, 1)
        r = b.get("/v2/library/flaky-never/manifests/v1?ns=flaky.test", headers={"Accept": ACCEPT})
        self.assertError(r, 404, "MANIFEST_UNKNOWN", "a miss with the upstream answering 503")
        r = b.get(f"/v2/library/flaky/blobs/{bt.sha256_digest(os.urandom(8))}?ns=flaky.test")
        self.assertError(r, 404, "BLOB_UNKNOWN", "a blob miss with the upstream answering 503")
        self.assertGreater(metric(b.metrics(), "berth_proxy_upstream_errors_total", "flaky.test"), errors_before)
        # answering again: a moved tag is picked up at the next check
        relay.set_fail_status(None)
        img2 = a.push_image("library/flaky", "v1", (950,))
        fresh = bt.poll(lambda: (lambda r: r if r.header("Docker-Content-Digest") == img2["digest"] else None)(
            b.get("/v2/library/flaky/manifests/v1?ns=flaky.test", headers={"Accept": ACCEPT})),
            FAST_INTERVAL + 8, 0.2, "the moved tag once the upstream answers again")
        self.assertEqual(fresh.body, img2["manifest"])

    def test_upstream_frozen(self):
        # an upstream that accepts connections but never answers (SIGSTOP): a cached tag past its
        # interval is still served, and a miss is answered, each within a bounded time
        b, a = self.b, self.a
        img = a.push_image("library/frozen", "v1", (800,))
        self.pull(b, "library/frozen", "v1", "?ns=fast.test", img, what="before the upstream hangs")
        fetched = time.monotonic()
        a.proc.send_signal(signal.SIGSTOP)
        self.addCleanup(self.ensure_upstream)
        self.addCleanup(a.proc.send_signal, signal.SIGCONT)
        time.sleep(max(0.0, fetched + FAST_INTERVAL + 0.3 - time.monotonic()))  # the interval itself
        # The first request waits out the 5 s answer timeout; the upstream is then skipped, so
        # the miss right after it is answered at once.
        for path, status, deadline in (("/v2/library/frozen/manifests/v1?ns=fast.test", 200, FROZEN_DEADLINE),
                                       ("/v2/library/frozen-never/manifests/v1?ns=fast.test", 404, 1.0)):
            t = time.monotonic()
            r = b.get(path, headers={"Accept": ACCEPT}, timeout=60)
            took = time.monotonic() - t
            self.assertEqual(r.status, status, f"{path} with the upstream hung: {r}")
            if status == 200:
                self.assertEqual(r.body, img["manifest"])
            self.assertLess(took, deadline, f"{path} took {took:.1f}s with the upstream hung")

    # ------------------------------------------------------------------ fetching

    def test_killed_mid_blob(self):
        b, a, relay = self.b, self.a, self.relay
        self.addCleanup(self.ensure_upstream)
        img = a.push_image("library/big", "v1", (64 << 20,))
        big = img["layers"][0]
        digest = bt.sha256_digest(big)
        self.pull_manifest_only(b, "library/big", "v1", "?ns=slow.test", img)
        relay.set_rate(4 << 20)  # 16 s for the whole blob: it is killed long before
        first = threading.Event()
        result = {}

        def client():
            result.update(dist.slow_get(b.port, f"/v2/library/big/blobs/{digest}?ns=slow.test",
                                        first_bytes_event=first, chunk=16384, pause=0.001))
        t = threading.Thread(target=client)
        t.start()
        self.assertTrue(first.wait(30), "no body bytes arrived at the client")
        a.kill()
        t.join(60)
        self.assertFalse(t.is_alive(), "the client still reads 60 s after the upstream died")
        got = result["body"]
        self.assertFalse(result["complete"] and result["status"] == 200 and got != big,
                         "a 200 with a full, wrong body")
        self.assertFalse(result["complete"], f"the whole blob arrived although the upstream died "
                                             f"({len(got)} bytes, status {result['status']})")
        self.assertLess(len(got), len(big))
        self.assertEqual(got, big[:len(got)], "the bytes served before the break are not the blob's")
        # nothing stored: not on disk, not served
        self.assertNotIn(digest.split(":")[1], bt.blob_files(b.root), "a partial blob was stored")
        for method in ("HEAD", "GET"):
            r = b.request(method, f"/v2/library/big/blobs/{digest}?ns=slow.test")
            self.assertEqual(r.status, 404, f"{method} of the broken blob with the upstream down: {r}")
        r = b.get(f"/v2/docker.io/library/big/blobs/{digest}")
        self.assertEqual(r.status, 404, r)
        # the upstream is back: fetched again, whole and right
        gets_before = len(a.requests("GET", f"/v2/library/big/blobs/{digest}"))
        a.restart()
        relay.set_rate(None)
        self.wait_reachable("slow.test")
        r = b.get(f"/v2/library/big/blobs/{digest}?ns=slow.test", timeout=120)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(r.body), len(big))
        self.assertTrue(r.body == big, "re-fetched blob bytes differ")
        self.assertEqual(len(a.requests("GET", f"/v2/library/big/blobs/{digest}")), gets_before + 1)
        self.assertIn(digest.split(":")[1], bt.blob_files(b.root))
        self.assertEqual(bt.file_sha256(bt.blob_files(b.root)[digest.split(":")[1]]), digest.split(":")[1])

    def pull_manifest_only(self, b, repo, ref, query, img):
        r = b.get(f"/v2/{repo}/manifests/{ref}{query}", headers={"Accept": ACCEPT})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, img["manifest"])

    def test_single_flight(self):
        b, a, relay = self.b, self.a, self.relay
        self.addCleanup(self.ensure_upstream)
        img = a.push_image("library/flight", "v1", (16 << 20,))
        data = img["layers"][0]
        digest = bt.sha256_digest(data)
        self.pull_manifest_only(b, "library/flight", "v1", "?ns=slow.test", img)
        before = b.metrics()
        relay.set_rate(12 << 20)  # about 1.4 s: every client arrives while the fetch runs
        results = dist.concurrent_gets([(b, f"/v2/library/flight/blobs/{digest}?ns=slow.test")] * 16)
        for i, r in enumerate(results):
            self.assertEqual(r.status, 200, f"client {i}: {r}")
            self.assertEqual(r.header("OCI-Namespace"), "slow.test")
            self.assertTrue(r.body == data, f"client {i}: {len(r.body)} bytes, sha {bt.sha256_digest(r.body)}")
        path = f"/v2/library/flight/blobs/{digest}"
        bt.poll(lambda: a.requests("GET", path), 10, 0.05, "the upstream's access log line")
        self.assertEqual(len(a.requests("GET", path)), 1, f"upstream GETs: {a.requests(path=path)}")
        relayed = [req for c in relay.connections(path) for req in c["requests"]
                   if req[0] == "GET" and req[1].split("?")[0] == path]
        self.assertEqual(len(relayed), 1, "GETs of the blob that went through the relay")
        after = b.metrics()
        self.assertGreaterEqual(metric(after, "berth_proxy_coalesced_total", "slow.test") -
                                metric(before, "berth_proxy_coalesced_total", "slow.test"), 1)
        self.assertGreaterEqual(metric(after, "berth_proxy_fetched_bytes_total", "slow.test") -
                                metric(before, "berth_proxy_fetched_bytes_total", "slow.test"), len(data))

    def test_first_reader_disconnects(self):
        # the client whose miss started the fetch goes away; a client that joined still gets the
        # whole blob from that one fetch
        b, a, relay = self.b, self.a, self.relay
        self.addCleanup(self.ensure_upstream)
        data = os.urandom(8 << 20)
        digest = a.push_blob("library/leaver", data)
        path = f"/v2/library/leaver/blobs/{digest}"
        relay.set_rate(4 << 20)  # 2 s
        first, stop = threading.Event(), threading.Event()
        leaver = {}

        def leave():
            leaver.update(dist.slow_get(b.port, f"{path}?ns=slow.test", first_bytes_event=first, stop_reading=stop))
        t = threading.Thread(target=leave)
        t.start()
        self.assertTrue(first.wait(30), "no body bytes reached the first client")
        stop.set()  # closes its connection
        t.join(30)
        self.assertFalse(leaver["complete"])
        r = b.get(f"{path}?ns=slow.test", timeout=120)
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.body == data, "the joining client's bytes differ")
        self.assertEqual(len(a.requests("GET", path)), 1, a.requests(path=path))

    def test_corrupt_upstream(self):
        # bytes that do not match their digest are never stored, and never served as a whole
        b, a = self.b, self.a
        img = a.push_image("library/corrupt", "v1", (300_000,))
        layer = img["layers"][0]
        digest = bt.sha256_digest(layer)
        errors_before = metric(b.metrics(), "berth_proxy_upstream_errors_total", "corrupt.test")
        for ref in ("v1", img["digest"]):
            r = b.get(f"/v2/library/corrupt/manifests/{ref}?ns=corrupt.test", headers={"Accept": ACCEPT})
            self.assertError(r, 404, "MANIFEST_UNKNOWN", f"corrupted manifest by {ref}")
        for attempt in range(2):
            res = dist.slow_get(b.port, f"/v2/library/corrupt/blobs/{digest}?ns=corrupt.test")
            if res["status"] == 200:
                self.assertFalse(res["complete"], f"attempt {attempt}: a complete 200 for a corrupted blob")
                self.assertEqual(res["body"][:100], layer[:min(100, len(res["body"]))], "bytes before the flip")
            else:
                self.assertEqual(res["status"], 404, res["headers"])
            self.assertNotIn(digest.split(":")[1], bt.blob_files(b.root), "a corrupted blob was stored")
        self.assertGreater(metric(b.metrics(), "berth_proxy_upstream_errors_total", "corrupt.test"), errors_before)
        # the same content through a sound upstream is fine
        self.pull(b, "library/corrupt", "v1", "?ns=docker.io", img, what="sound upstream")

    def test_max_concurrent(self):
        # five different blobs at once through an upstream allowed two requests at a time: the
        # relay (1 MiB/s per connection) never carries more than two transfers at once
        b, a, relay = self.b, self.a, self.narrow
        self.addCleanup(relay.set_rate, None)
        blobs = {}
        for _ in range(5):
            data = os.urandom(1 << 20)
            blobs[a.push_blob("library/narrow", data)] = data
        relay.set_rate(1 << 20)
        results, errors = {}, []

        def client(digest):
            try:
                results[digest] = b.get(f"/v2/library/narrow/blobs/{digest}?ns=narrow.test", timeout=120)
            except Exception as err:  # noqa: BLE001 - reported below
                errors.append(f"{digest}: {err!r}")
        threads = [threading.Thread(target=client, args=(d,)) for d in blobs]
        started = time.monotonic()
        for t in threads:
            t.start()
        most = 0
        while any(t.is_alive() for t in threads) and time.monotonic() - started < 120:
            most = max(most, relay.active())
            time.sleep(0.02)
        for t in threads:
            t.join(10)
        self.assertEqual(errors, [])
        for digest, data in blobs.items():
            self.assertEqual(results[digest].status, 200, results[digest])
            self.assertTrue(results[digest].body == data)
        self.assertLessEqual(most, 2, "more upstream transfers at once than max_concurrent")
        self.assertEqual(most, 2, "the transfers never overlapped (the test saw no concurrency)")
        self.assertGreater(time.monotonic() - started, 2.5, "5 MiB at 2 x 1 MiB/s took less than 2.5 s")

    def test_blob_without_manifest(self):
        # containerd asks for blobs by digest; one that was never pulled through berth is fetched
        b, a = self.b, self.a
        data = os.urandom(300_000)
        digest = a.push_blob("library/blobonly", data)
        r = b.get(f"/v2/library/blobonly/blobs/{digest}?ns=docker.io")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.body == data)
        self.assertEqual(r.header("OCI-Namespace"), "docker.io")
        # a digest the upstream's bytes do not match is never served: ask for a digest under a
        # repository that does not link it upstream
        other = bt.sha256_digest(os.urandom(100))
        r = b.get(f"/v2/library/blobonly/blobs/{other}?ns=docker.io")
        self.assertError(r, 404, "BLOB_UNKNOWN", "blob unknown upstream")

    # ------------------------------------------------------------------ upstream auth and TLS

    def test_basic_auth_upstream(self):
        b, up = self.b, self.bdist
        img = up.push_image("library/secret", "v1", (1000,))
        before = len(up.access_log())
        self.pull(b, "library/secret", "v1", "?ns=auth.test", img, expect_ns="auth.test", what="Basic upstream")
        ok = [x for x in up.access_log()[before:] if "/library/secret/" in x.path and x.status == 200]
        self.assertGreaterEqual(len(ok), 3, up.access_log()[before:])
        for ns in ("noauth.test", "badpw.test"):
            r = b.get(f"/v2/library/secret/manifests/v1?ns={ns}", headers={"Accept": ACCEPT})
            self.assertError(r, 404, "MANIFEST_UNKNOWN", f"{ns}: no or wrong credentials")
            r = b.get(f"/v2/library/secret/blobs/{next(iter(img['blobs']))}?ns={ns}")
            self.assertError(r, 404, "BLOB_UNKNOWN", f"{ns}: blob")
        refused = [x for x in up.access_log()[before:] if x.status == 401 and "/library/secret/" in x.path]
        self.assertTrue(refused, "the credential-less upstreams never asked the upstream")

    def test_tls_upstream(self):
        b, c = self.b, self.c
        good = c.push_image("library/tls-a", "v1", (1000,))
        insecure = c.push_image("library/tls-b", "v1", (1000,))
        wrong = c.push_image("library/tls-c", "v1", (1000,))
        self.pull(b, "library/tls-a", "v1", "?ns=tls.test", good, expect_ns="tls.test", what="TLS with ca_file")
        self.pull(b, "library/tls-b", "v1", "?ns=insecure.test", insecure, expect_ns="insecure.test",
                  what="TLS, insecure")
        before = len(c.access_log())
        errors_before = metric(b.metrics(), "berth_proxy_upstream_errors_total", "wrongca.test")
        r = b.get("/v2/library/tls-c/manifests/v1?ns=wrongca.test", headers={"Accept": ACCEPT})
        self.assertError(r, 404, "MANIFEST_UNKNOWN", "TLS with the wrong CA")
        r = b.get(f"/v2/library/tls-c/blobs/{wrong['digest']}?ns=wrongca.test")
        self.assertEqual(r.status, 404, r)
        self.assertEqual([x for x in c.access_log()[before:] if "tls-c" in x.path], [],
                         "a request got through a TLS handshake with the wrong CA")
        self.assertGreater(metric(b.metrics(), "berth_proxy_upstream_errors_total", "wrongca.test"), errors_before)

        def logged():
            return [x for x in b.log_lines() if x.get("msg") != "request" and x.get("level") in ("warn", "warning", "error")
                    and ("wrongca.test" in json.dumps(x) or f":{c.port}" in json.dumps(x))]
        bt.poll(logged, 5, 0.1, "a logged error about the wrongca.test upstream")

    # ------------------------------------------------------------------ observability

    def test_metrics_and_access_log(self):
        b, a = self.b, self.a
        img = a.push_image("library/metrics", "v1", (4000, 5000))
        targets = ["/v2/library/metrics/manifests/v1?ns=docker.io"] + \
                  [f"/v2/library/metrics/blobs/{d}?ns=docker.io" for d in img["blobs"]]
        m0 = b.metrics()
        self.pull(b, "library/metrics", "v1", "?ns=docker.io", img, what="first")
        m1 = b.metrics()
        self.pull(b, "library/metrics", "v1", "?ns=docker.io", img, what="second")
        m2 = b.metrics()

        def delta(x, y, name):
            return metric(y, name, "docker.io") - metric(x, name, "docker.io")
        reads = 1 + len(img["blobs"])  # the manifest, the config and two layers
        self.assertEqual(delta(m0, m1, "berth_proxy_misses_total"), reads, "misses of the first pull")
        self.assertEqual(delta(m0, m1, "berth_proxy_hits_total"), 0, "hits of the first pull")
        self.assertEqual(delta(m1, m2, "berth_proxy_hits_total"), reads, "hits of the second pull")
        self.assertEqual(delta(m1, m2, "berth_proxy_misses_total"), 0, "misses of the second pull")
        blob_bytes = sum(len(x) for x in img["blobs"].values())
        fetched = delta(m0, m1, "berth_proxy_fetched_bytes_total")
        self.assertGreaterEqual(fetched, blob_bytes)
        self.assertLessEqual(fetched, blob_bytes + len(img["manifest"]))
        self.assertEqual(delta(m1, m2, "berth_proxy_fetched_bytes_total"), 0)
        self.assertGreaterEqual(delta(m0, m1, "berth_proxy_upstream_seconds_count"), 1)
        self.assertGreater(delta(m0, m1, "berth_proxy_upstream_seconds_sum"), 0)
        self.assertEqual(delta(m1, m2, "berth_proxy_upstream_seconds_count"), 0)
        for name in ("berth_proxy_coalesced_total", "berth_proxy_upstream_errors_total"):
            self.assertTrue(any(k.startswith(name) for k in m2), f"{name} missing from /metrics")
        # the access log's cache field, per request
        for target in targets:
            lines = access_lines(b, target)
            self.assertEqual([x.get("cache") for x in lines], ["fetched", "hit"], target)
        # requests that are no proxy reads carry no cache field
        b.get("/v2/")
        plain = [x for x in b.log_lines() if x.get("msg") == "request" and x.get("target") == "/v2/"]
        self.assertTrue(plain)
        self.assertNotIn("cache", plain[-1])


if __name__ == "__main__":
    dist.skip_unless_available("test_proxy.py")
    unittest.main()
