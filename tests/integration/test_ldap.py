#!/usr/bin/env python3
"""Logins from a site directory (auth.ldap) against a real slapd started here: a user is found
by the searching account, then bound with the password given; groupOfNames entries naming the
user become group:CN for the rules. StartTLS on ldap://, ldaps://, a directory stopped (503 at
once) or frozen (503 within the timeout, nothing else held up), and brought back."""

import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import slapd  # noqa: E402

# A directory user is ldap:NAME and its groups ldap:CN (the prefixes' defaults): never the htpasswd
# user of the same name, and no ${user} (not one path component).
RULES = [
    {"repository": "team/**", "principals": ["group:ldap:pushers"], "actions": ["pull", "push"]},
    {"repository": "bob/**", "principals": ["user:ldap:bob"], "actions": ["pull", "push"]},
    {"repository": "erin/**", "principals": ["user:ldap:erin"], "actions": ["pull", "push"]},
    {"repository": "alice/**", "principals": ["user:ldap:alice"], "actions": ["pull"]},
    {"repository": "team/**", "principals": ["authenticated"], "actions": ["pull"]},
    {"repository": "${user}/**", "principals": ["authenticated"], "actions": ["pull", "push"]},
]


def ldap_config(**overrides):
    config = { "ca_file": "ca.crt", "bind_dn": slapd.SERVICE_DN,
              "bind_password_file": "ldap-password",
              "user_search_base": f"ou=people,{slapd.SUFFIX}",
              "user_filter": "(&(objectClass=inetOrgPerson)(uid={username})(!(employeeType=disabled)))",
              "group_search_base": f"ou=groups,{slapd.SUFFIX}", "timeout_seconds": 2}
    config.update(overrides)
    return config


@unittest.skipUnless(slapd.available(), "slapd is not installed")
class LdapTest(bt.ServerTest):
    passwords = {"root": "root-pw"}

    @classmethod
    def configure(cls, b):
        ca_cert, ca_key = bt.make_ca(b.tmp)
        os.replace(ca_cert, os.path.join(b.tmp, "ca.crt"))
        ca_cert = os.path.join(b.tmp, "ca.crt")
        d = slapd.Slapd(b.tmp, ca_cert, ca_key)
        cls.directory = d
        for user in ("alice", "bob", "erin", "frank", "gina", "hank", "ivan"):
            d.add_user(user, f"{user}-pw")
        d.add_user("carol", "carol-pw", disabled=True)
        d.add_group("pushers", ["alice", "carol"])
        d.add_group("readers", ["bob"])
        d.start()
        cls.addClassCleanup(d.stop)
        with open(os.path.join(b.tmp, "ldap-password"), "w") as f:
            f.write(d.service_password + "\n")
        bt.gen_ec_key(os.path.join(b.tmp, "token.key"))
        return {"auth": {"htpasswd": "htpasswd",
                         "token": {"signing_key": "token.key", "issuer": "berth", "service": "berth"},
                         "ldap": ldap_config(url=d.url), "rules": RULES}}

    def login(self, user, password, path="/v2/"):
        return self.b.request("GET", path, headers=bt.basic_auth(user, password))

    def push(self, repo, headers):
        image = bt.make_image((256,))
        for digest, data in image["blobs"].items():
            r = self.b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                               headers={**headers, "Content-Type": "application/octet-stream"})
            if r.status != 201:
                return r.status
        return self.b.request("PUT", f"/v2/{repo}/manifests/v1", body=image["manifest"],
                              headers={**headers, "Content-Type": bt.OCI_MANIFEST}).status

    def metric(self, result):
        metrics = bt.parse_metrics(self.b.request("GET", "/metrics").body.decode())
        return metrics.get(f'berth_auth_logins_total{{method="ldap",result="{result}"}}', 0)

    def test_group_grants_push_and_member_of_none_only_pulls(self):
        alice = bt.basic_auth("alice", "alice-pw")
        self.assertEqual(self.push("team/app", alice), 201)
        bob = bt.basic_auth("bob", "bob-pw")
        self.assertEqual(self.push("team/bob-app", bob), 403)
        self.assertEqual(self.b.request("GET", "/v2/team/bob-app/tags/list", headers=alice).status, 404)
        self.assertEqual(self.b.request("GET", "/v2/team/app/manifests/v1", headers=bob).status, 200)
        # A rule naming the directory user ldap:bob: bob pushes his own space.
        self.assertEqual(self.push("bob/tool", bob), 201)
        self.assertEqual(self.push("ldap-bob/tool", bob), 403)

    def test_refusals_change_nothing(self):
        for user, password in (("alice", "wrong"), ("nobody", "x"), ("carol", "carol-pw"), ("alice", ""),
                               ("*", "alice-pw"), ("alice)(uid=*", "alice-pw"), ("a" * 300, "pw")):
            with self.subTest(user=user[:20], password=password):
                r = self.login(user, password)
                self.assertEqual(r.status, 401, r.body)
                self.assertIsNotNone(r.header("WWW-Authenticate"))
                self.assertEqual(self.push("erin/refused", bt.basic_auth(user, password)), 401)
        self.assertEqual(self.b.request("GET", "/v2/erin/refused/tags/list",
                                        headers=bt.basic_auth("erin", "erin-pw")).status, 404)

    def test_token_endpoint_takes_directory_logins(self):
        r = self.b.request("GET", "/auth/token?service=berth&scope=repository:team/app:pull,push",
                           headers=bt.basic_auth("Alice", "alice-pw"))
        self.assertEqual(r.status, 200, r.body)
        claims = bt.jwt_claims(r.json()["token"])
        self.assertEqual(claims["sub"], "ldap:alice")  # directory names are one user whatever their case
        self.assertEqual(claims["access"], [{"type": "repository", "name": "team/app", "actions": ["pull", "push"]}])
        r = self.b.request("GET", "/auth/token?service=berth&scope=repository:team/app:pull",
                           headers=bt.basic_auth("alice", "not-her-password"))
        self.assertEqual(r.status, 401)

    def test_failed_logins_are_throttled_per_user(self):
        for _ in range(5):
            self.assertEqual(self.login("frank", "guess").status, 401)
        r = self.login("frank", "frank-pw")
        self.assertEqual(r.status, 429, r.body)
        self.assertIn("TOOMANYREQUESTS", r.body.decode())
        self.assertEqual(self.login("gina", "gina-pw").status, 200)  # another user is not held back

    def test_outage_answers_503_at_once_and_logins_come_back(self):
        d = self.directory
        self.assertEqual(self.login("erin", "erin-pw").status, 200)  # remembered for cache_seconds
        unavailable = self.metric("unavailable")
        d.stop()
        try:
            started = time.monotonic()
            r = self.login("hank", "hank-pw")
            self.assertLess(time.monotonic() - started, 2)
            self.assertEqual(r.status, 503, r.body)
            self.assertIn("UNAVAILABLE", r.body.decode())
            self.assertEqual(self.login("erin", "erin-pw").status, 200)  # a recent login needs no directory
            self.assertEqual(self.login("root", "root-pw").status, 200)  # nor does htpasswd
            self.assertGreater(self.metric("unavailable"), unavailable)
        finally:
            d.start()
        bt.poll(lambda: self.login("hank", "hank-pw").status == 200, 15, interval=0.2, what="logins back")

    def test_frozen_directory_holds_no_one_else(self):
        d = self.directory
        d.freeze()
        results = {}

        def frozen_login():
            started = time.monotonic()
            results["status"] = self.login("gina-frozen", "pw").status
            results["seconds"] = time.monotonic() - started

        try:
            thread = threading.Thread(target=frozen_login)
            thread.start()
            # While the login waits on the directory, everything else is answered.
            answered = 0
            while thread.is_alive():
                started = time.monotonic()
                self.assertEqual(self.login("root", "root-pw").status, 200)
                self.assertEqual(self.b.request("GET", "/healthz").status, 200)
                self.assertLess(time.monotonic() - started, 1)
                answered += 1
            thread.join(20)
            self.assertGreater(answered, 3)
            self.assertFalse(thread.is_alive())
            self.assertEqual(results["status"], 503)
            self.assertLess(results["seconds"], 2 * 2 + 2)  # timeout_seconds per step, not more
        finally:
            d.thaw()
        # ivan has not signed in before: his login needs the directory.
        bt.poll(lambda: self.login("ivan", "ivan-pw").status == 200, 15, interval=0.2, what="logins back")


@unittest.skipUnless(slapd.available(), "slapd is not installed")
class LdapTlsTest(unittest.TestCase):
    """ldaps:// works with the site's CA; a directory whose certificate is not trusted is never sent
    a password (503, not a fall back to plain text)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="berth-ldap-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        ca_cert, ca_key = bt.make_ca(cls.tmp)
        os.replace(ca_cert, os.path.join(cls.tmp, "ca.crt"))
        cls.directory = slapd.Slapd(cls.tmp, os.path.join(cls.tmp, "ca.crt"), ca_key)
        cls.directory.add_user("alice", "alice-pw")
        cls.directory.start()
        cls.addClassCleanup(cls.directory.stop)
        with open(os.path.join(cls.tmp, "ldap-password"), "w") as f:
            f.write(cls.directory.service_password)
        bt.make_ca(cls.tmp, "other-ca")

    def serve(self, **ldap):
        def configure(b):
            for name in ("ca.crt", "ldap-password", "other-ca.crt"):
                os.link(os.path.join(self.tmp, name), os.path.join(b.tmp, name))
            return {"auth": {"ldap": ldap_config(**{"url": self.directory.url, **ldap}), "rules": RULES}}
        return bt.serve(self.addCleanup, configure)

    def test_ldaps(self):
        b = self.serve(url=self.directory.ldaps_url)
        r = b.request("GET", "/v2/alice/x/tags/list", headers=bt.basic_auth("alice", "alice-pw"))
        self.assertEqual(r.status, 404, r.body)  # signed in: the repository is simply absent

    def test_untrusted_directory_gets_no_password(self):
        for url in (self.directory.url, self.directory.ldaps_url):
            with self.subTest(url=url):
                b = self.serve(url=url, ca_file="other-ca.crt")
                r = b.request("GET", "/v2/alice/x/tags/list", headers=bt.basic_auth("alice", "alice-pw"))
                self.assertEqual(r.status, 503, r.body)

    def test_configuration_is_checked_at_start(self):
        for ldap, message in (({"url": "http://x"}, "auth.ldap.url"),
                              ({"user_filter": "uid=x"}, "auth.ldap.user_filter"),
                              ({"bind_password_file": None}, "bind_dn and bind_password_file"),
                              ({"colour": "blue"}, "unknown key auth.ldap.colour")):
            with self.subTest(message=message):
                config = ldap_config(**{"url": self.directory.url, **ldap})
                config = {k: v for k, v in config.items() if v is not None}
                b = bt.Berth(config={"auth": {"ldap": config}})
                self.addCleanup(b.cleanup)
                for name in ("ca.crt", "ldap-password"):
                    os.link(os.path.join(self.tmp, name), os.path.join(b.tmp, name))
                with self.assertRaises(AssertionError) as failed:
                    b.start(timeout=10)
                self.assertIn(message, str(failed.exception))


if __name__ == "__main__":
    unittest.main()
