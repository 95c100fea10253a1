#!/usr/bin/env python3
"""Identities under attack (issue 34, findings 6, 12, 13, 14 and 17; /work/notes/contract-34.md),
against the real binary, a real slapd started here and JWTs minted here.

- 6, LDAP throttle: after 5 failed logins of alice, every spelling the directory takes for alice
  (" alice", "alice ", "ALICE", " Alice ", ...) is 429 too, with a wrong password and with the
  right one, on /v2/ and at the token endpoint, while bob still signs in. 4,100 failed logins of
  junk names (more than the failure table held) do not lift alice's 429.
- 12, identities carry their source: a second cluster's service account token (an issuer without
  "service_accounts": true) gets nothing from "${namespace}/**" for group:system:serviceaccounts,
  nor does a Dex token carrying a kubernetes.io claim; a Dex user whose preferred_username is
  admin is "issuer:https://dex.example#admin", not the htpasswd user admin (no rule for
  user:admin applies, the token endpoint grants nothing and names the qualified subject), and a
  rule naming the qualified name does apply. With the new keys: only the issuer marked
  service_accounts makes service accounts; username_prefix/groups_prefix name the Dex user.
- 13: with slapd frozen (SIGSTOP), 8 concurrent /ui/login sign-ins waiting on it (as many as
  workers, 8: the default on 2 cores, set explicitly) hold up no htpasswd-authenticated
  GET /v2/<repo>/tags/list (each answered within 1 s), nor an htpasswd user's sign-in; they end
  in login?failed, and the directory serves sign-ins once thawed.
- 14: ldaps:// with slapd frozen and timeout_seconds 2: a login answers 503 UNAVAILABLE within
  3.5 s (not when slapd resumes), on /v2/ and the token endpoint, and ldap:// (StartTLS) too.
- 17: htpasswd (bcrypt cost 5): the median time of 30 logins of an unknown user is at least half
  that of 30 logins of a known user with a wrong password (distinct passwords: nothing cached),
  on /v2/ and at the token endpoint.

Tests named test_fNN_* need only configuration keys the unfixed binary knows too, so they
reproduce the finding there; test_f12_new_keys_* configures the keys the fix adds.
"""

import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
import slapd  # noqa: E402

CLUSTER = "https://kubernetes.default.svc.cluster.local"
SECOND = "https://kubernetes.second-cluster.example"
DEX = "https://dex.example"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
TOKEN = {"signing_key": "token.key", "issuer": "berth", "service": "berth"}
SA_RULE = {"repository": "${namespace}/**", "principals": ["group:system:serviceaccounts"],
           "actions": ["pull", "push"]}
ADMIN_RULE = {"repository": "admin-only/**", "principals": ["user:admin"], "actions": ["pull", "push"]}
# Seen from the htpasswd admin, every repository: to check that a refused push left nothing.
ADMIN_READS = {"repository": "**", "principals": ["user:admin"], "actions": ["pull"]}
SPELLINGS = (" alice", "alice ", "ALICE", " Alice ", "Alice", "aLiCe", "  alice  ")


def serve(config, ready=(401,)):
    """A berth with this config (relative files resolve against its tmp dir, made before)."""
    b = bt.Berth()
    b.config = config(b.tmp) if callable(config) else config
    b.ready_statuses = ready
    return b


def login(b, user, password, path="/v2/", timeout=bt.REQUEST_TIMEOUT):
    return b.request("GET", path, headers=bt.basic_auth(user, password), timeout=timeout)


def token_request(b, headers, *scopes):
    query = "&".join("scope=" + urllib.parse.quote(s) for s in scopes)
    return b.get(f"/auth/token?service=berth&{query}", headers=headers)


def push(b, repo, headers, tag="v1"):
    """Blobs then the manifest; the status of the first refused step, or 201."""
    image = bt.make_image((256,))
    for digest, data in image["blobs"].items():
        r = b.request("POST", f"/v2/{repo}/blobs/uploads/?digest={digest}", body=data,
                      headers={**headers, "Content-Type": "application/octet-stream"})
        if r.status != 201:
            return r.status
    return b.request("PUT", f"/v2/{repo}/manifests/{tag}", body=image["manifest"],
                     headers={**headers, "Content-Type": bt.OCI_MANIFEST}).status


def directory_connections(pid, port):
    """Established TCP connections the process pid holds to 127.0.0.1:port (from /proc)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return 0
    count = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].split(":")[1], 16) == port and fields[9] in inodes:
                count += 1
    return count


def flood(b, credentials, workers=16):
    """GET /v2/ with Basic for each (user, password), on keep-alive connections; {status: count}."""
    chunks = [credentials[i::workers] for i in range(workers)]

    def run(chunk):
        statuses = {}
        conn = b.conn(30)
        try:
            for user, password in chunk:
                for attempt in (1, 2):
                    try:
                        conn.request("GET", "/v2/", headers=bt.basic_auth(user, password))
                        r = conn.getresponse()
                        r.read()
                        statuses[r.status] = statuses.get(r.status, 0) + 1
                        break
                    except (http.client.HTTPException, ConnectionError):
                        conn.close()  # the server closed a kept-alive connection: open another
                        if attempt == 2:
                            raise
        finally:
            conn.close()
        return statuses

    total = {}
    with ThreadPoolExecutor(workers) as pool:
        for statuses in pool.map(run, chunks):
            for status, n in statuses.items():
                total[status] = total.get(status, 0) + n
    return total


def timed(b, method, path, headers, body=None, timeout=30):
    """(status or None when the client gave up, seconds, response) on a connection opened beforehand."""
    conn = b.conn(timeout)
    conn.connect()
    started = time.monotonic()
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        return r.status, time.monotonic() - started, bt.Resp(r.status, r.getheaders(), data)
    except (TimeoutError, OSError, http.client.HTTPException):
        return None, time.monotonic() - started, None
    finally:
        conn.close()


# --------------------------------------------------------------------------- LDAP: 6, 13, 14


@unittest.skipUnless(slapd.available(), "slapd is not installed")
class DirectoryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="berth-identities-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        ca_cert, ca_key = bt.make_ca(cls.tmp)
        cls.ca = ca_cert
        d = slapd.Slapd(cls.tmp, ca_cert, ca_key)
        for user in ("alice", "bob", "carol", "dave"):
            d.add_user(user, f"{user}-pw")
        d.start()
        cls.addClassCleanup(d.stop)
        cls.directory = d
        cls.password_file = os.path.join(cls.tmp, "ldap-password")
        with open(cls.password_file, "w") as f:
            f.write(d.service_password + "\n")

    def ldap(self, **overrides):
        config = {"url": self.directory.url, "ca_file": self.ca, "bind_dn": slapd.SERVICE_DN,
                  "bind_password_file": self.password_file,
                  "user_search_base": f"ou=people,{slapd.SUFFIX}",
                  "user_filter": "(&(objectClass=inetOrgPerson)(uid={username}))", "timeout_seconds": 2}
        config.update(overrides)
        return config

    def start(self, auth, **extra):
        b = serve(lambda tmp: {"auth": auth, **extra})
        self.addCleanup(b.cleanup)
        if "token" in auth:
            bt.gen_ec_key(os.path.join(b.tmp, "token.key"))
        if "htpasswd" in auth:
            bt.write_htpasswd(os.path.join(b.tmp, "htpasswd"), {"root": "root-pw"})
        return b.start()

    def frozen(self):
        """Freeze slapd; thawed again at cleanup whatever happens."""
        self.directory.freeze()
        self.addCleanup(self.directory.thaw)

    # ---- finding 6

    def test_f06_throttle_holds_for_every_spelling_of_the_user(self):
        b = self.start({"token": TOKEN, "ldap": self.ldap()})
        self.assertEqual(login(b, "bob", "bob-pw").status, 200)
        for i in range(5):
            self.assertEqual(login(b, "alice", f"guess-{i}").status, 401, f"failed login {i + 1}")
        r = login(b, "alice", "alice-pw")
        self.assertEqual(r.status, 429, r)
        self.assertEqual(r.error_codes(), ["TOOMANYREQUESTS"], r)
        for name in SPELLINGS:
            for password in ("another-guess", "alice-pw"):
                with self.subTest(name=repr(name), password=password):
                    r = login(b, name, password)
                    self.assertEqual(r.status, 429, f"{name!r}: {r}")
                    self.assertIsNotNone(r.header("Retry-After"))
                    r = token_request(b, bt.basic_auth(name, password), "repository:alice/app:pull")
                    self.assertEqual(r.status, 429, f"{name!r} at the token endpoint: {r}")
                    self.assertNotIn("token", r.json() or {})
        # Another user is not held back, nor is one whose name merely contains alice's.
        self.assertEqual(login(b, "bob", "bob-pw").status, 200)
        self.assertEqual(login(b, "alicex", "alice-pw").status, 401)

    def test_f06_junk_names_do_not_lift_a_throttle(self):
        b = self.start({"ldap": self.ldap(timeout_seconds=10)})
        first_failure = time.monotonic()
        for i in range(5):
            self.assertEqual(login(b, "alice", f"guess-{i}").status, 401)
        self.assertEqual(login(b, "alice", "alice-pw").status, 429)
        statuses = flood(b, [(f"junk{i:05d}", f"pw-{i}") for i in range(4100)])
        self.assertEqual(sum(statuses.values()), 4100)
        self.assertEqual(set(statuses) - {401, 429}, set(), f"junk logins answered {statuses}")
        elapsed = time.monotonic() - first_failure
        # alice's failures count for 60 s: past that her 429 ending would prove nothing.
        self.assertLess(elapsed, 55, f"4,100 junk logins took {elapsed:.1f} s: too slow to prove anything")
        for name, password in (("alice", "alice-pw"), ("alice", "guess"), (" ALICE ", "alice-pw")):
            with self.subTest(name=name, password=password):
                r = login(b, name, password)
                self.assertEqual(r.status, 429, f"{name!r} after {statuses} junk logins: {r}")
        self.assertEqual(login(b, "carol", "carol-pw").status, 200)

    # ---- finding 13

    def test_f13_hung_directory_sign_ins_hold_no_htpasswd_reads(self):
        # workers 8, the default on 2 cores: 8 sign-ins are as many as there are workers.
        b = self.start({"htpasswd": "htpasswd", "ldap": self.ldap(timeout_seconds=10),
                        "rules": [{"repository": "team/**", "principals": ["user:root"],
                                   "actions": ["pull", "push"]}]},
                       threads={"workers": 8})
        root = bt.basic_auth("root", "root-pw")
        self.assertEqual(push(b, "team/app", root), 201)
        self.assertEqual(b.get("/v2/team/app/tags/list", headers=root).status, 200)
        self.frozen()
        answers = [None] * 8

        # Eight users (four of them unknown to the directory): none waits on another's question.
        names = ("alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank")

        def sign_in(i):
            body = urllib.parse.urlencode({"username": names[i], "password": f"guess-{i}"}).encode()
            answers[i] = b.request("POST", "/ui/login", body=body, headers=FORM, timeout=60)

        threads = [threading.Thread(target=sign_in, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()

        def hanging():
            alive = sum(t.is_alive() for t in threads)
            held = directory_connections(b.proc.pid, self.directory.port)
            return held >= 1 and held >= alive
        bt.poll(hanging, 10, what="the sign-ins waiting on the frozen directory")
        for i in range(3):
            status, seconds, r = timed(b, "GET", "/v2/team/app/tags/list", root)
            self.assertEqual(status, 200, f"tags/list {i} while the directory hangs: {r}")
            self.assertLess(seconds, 1, f"tags/list {i} took {seconds:.2f} s while 8 sign-ins hang")
            self.assertEqual(r.json(), {"name": "team/app", "tags": ["v1"]})
        status, seconds, r = timed(b, "GET", "/v2/team/app/manifests/v1", {**root, "Accept": bt.OCI_MANIFEST})
        self.assertEqual((status, seconds < 1), (200, True), f"manifest took {seconds:.2f} s: {r}")
        body = urllib.parse.urlencode({"username": "root", "password": "root-pw"}).encode()
        status, seconds, r = timed(b, "POST", "/ui/login", FORM, body)
        self.assertEqual((status, seconds < 1), (303, True), f"htpasswd sign-in took {seconds:.2f} s: {r}")
        self.assertEqual(r.header("Location"), "./")
        self.assertIsNotNone(r.header("Set-Cookie"))
        # All that was answered while the sign-ins still waited on the directory.
        self.assertTrue(any(t.is_alive() for t in threads), "the sign-ins ended before the checks")
        self.directory.thaw()
        for t in threads:
            t.join(60)
        for i, r in enumerate(answers):
            self.assertIsNotNone(r, f"sign-in {i} got no answer")
            self.assertEqual((r.status, r.header("Location")), (303, "login?failed"), f"sign-in {i}: {r}")
            self.assertIsNone(r.header("Set-Cookie"))
        form = urllib.parse.urlencode({"username": "bob", "password": "bob-pw"}).encode()

        def bob_signs_in():
            r = b.request("POST", "/ui/login", body=form, headers=FORM)
            return r.status == 303 and r.header("Location") == "./" and r.header("Set-Cookie")
        bt.poll(bob_signs_in, 15, interval=0.2, what="bob signs in once the directory is back")

    # ---- finding 14

    def test_f14_frozen_directory_answers_503_within_the_timeout(self):
        ldaps = self.start({"token": TOKEN, "ldap": self.ldap(url=self.directory.ldaps_url, timeout_seconds=2)})
        starttls = self.start({"ldap": self.ldap(timeout_seconds=2)})
        self.assertEqual(login(ldaps, "dave", "dave-pw").status, 200)  # ldaps works, and dave is remembered
        self.frozen()
        for what, b, user in (("ldaps", ldaps, "alice"), ("StartTLS", starttls, "bob")):
            with self.subTest(what):
                status, seconds, r = timed(b, "GET", "/v2/", bt.basic_auth(user, f"{user}-pw"), timeout=15)
                self.assertIsNotNone(status, f"{what}: no answer within {seconds:.1f} s of a frozen directory")
                self.assertEqual(status, 503, f"{what}: {r}")
                self.assertLess(seconds, 3.5, f"{what}: 503 after {seconds:.2f} s")
                self.assertEqual(r.error_codes(), ["UNAVAILABLE"], r)
                self.assertIsNotNone(r.header("Retry-After"))
        # Another new login to the ldaps directory, at the token endpoint: 503 too, as promptly.
        status, seconds, r = timed(ldaps, "GET", "/auth/token?service=berth&scope=repository:carol/x:pull",
                                   bt.basic_auth("carol", "carol-pw"), timeout=15)
        self.assertEqual((status, seconds < 3.5), (503, True), f"token endpoint after {seconds:.2f} s: {r}")
        # A login remembered from before the outage needs no directory.
        self.assertEqual(login(ldaps, "dave", "dave-pw", timeout=5).status, 200)
        self.directory.thaw()
        bt.poll(lambda: login(ldaps, "alice", "alice-pw").status == 200, 15, interval=0.2,
                what="ldaps logins back")


# --------------------------------------------------------------------------- trusted issuers: 12


class IssuerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="berth-issuers-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.keys = {}
        for issuer, name in ((CLUSTER, "cluster"), (SECOND, "second"), (DEX, "dex")):
            key = bt.gen_ec_key(os.path.join(cls.tmp, f"{name}.key"))
            jwks = os.path.join(cls.tmp, f"{name}-jwks.json")
            with open(jwks, "w") as f:
                json.dump({"keys": [bt.public_jwk(key, f"{name}-1")]}, f)
            cls.keys[issuer] = (key, f"{name}-1", jwks)

    def issuer(self, iss, **extra):
        entry = {"issuer": iss, "audiences": ["berth"], "jwks_file": self.keys[iss][2],
                 "max_token_lifetime_seconds": 3600}
        if iss == DEX:
            entry["username_claim"] = "preferred_username"
        entry.update(extra)
        return entry

    def start(self, issuers, rules):
        def config(tmp):
            bt.write_htpasswd(os.path.join(tmp, "htpasswd"), {"admin": "admin-pw"})
            bt.gen_ec_key(os.path.join(tmp, "token.key"))
            return {"auth": {"htpasswd": "htpasswd", "token": TOKEN, "oidc": issuers, "rules": rules}}
        b = serve(config)
        self.addCleanup(b.cleanup)
        return b.start()

    def jwt(self, iss, claims):
        key, kid, _ = self.keys[iss]
        return bt.make_jwt(claims, key, "ES256", header={"kid": kid})

    def sa_token(self, iss, namespace="payments", name="builder"):
        return self.jwt(iss, bt.service_account_claims(namespace, name, iss))

    def dex_token(self, username="admin", groups=(), **extra):
        """An ID token as Dex issues it: an opaque sub, the client id as aud, the user's names."""
        now = int(time.time())
        claims = {"iss": DEX, "sub": bt.b64url(f"\n\x05{username}\x12\x05local"), "aud": "berth",
                  "exp": now + 600, "iat": now, "at_hash": "x4VvOPQw8vgYxkJcIpOZpA",
                  "email": f"{username}@example.org", "email_verified": True, "groups": list(groups),
                  "name": username.title(), "preferred_username": username}
        claims.update(extra)
        return self.jwt(DEX, claims)

    def assertRefused(self, b, repo, headers, what):
        self.assertIn(push(b, repo, headers), (401, 403), what)
        admin = bt.basic_auth("admin", "admin-pw")
        r = b.get(f"/v2/{repo}/tags/list", headers=admin)
        self.assertEqual(r.status, 404, f"{what}: {repo} exists after the refused push: {r}")

    def start_without_new_keys(self):
        """The second cluster's issuer and Dex, configured as the unfixed binary takes them too."""
        dex_rule = {"repository": "dex-admin/**", "principals": [f"user:issuer:{DEX}#admin"],
                    "actions": ["pull", "push"]}
        b = self.start([self.issuer(SECOND), self.issuer(DEX)], [SA_RULE, ADMIN_RULE, ADMIN_READS, dex_rule])
        self.assertEqual(push(b, "admin-only/x", bt.basic_auth("admin", "admin-pw")), 201)  # the admin's own
        return b

    def test_f12_second_clusters_service_account_gets_no_namespace(self):
        b = self.start_without_new_keys()
        second = self.sa_token(SECOND)
        for headers in (bt.basic_auth("sa", second), bt.bearer(second)):
            scheme = headers["Authorization"].split()[0].lower()
            with self.subTest("second cluster's service account", scheme=scheme):
                self.assertEqual(b.get("/v2/", headers=headers).status, 200)  # a valid identity, just not an SA
                self.assertRefused(b, f"payments/x-{scheme}", headers, "second cluster's token")
        r = token_request(b, bt.basic_auth("sa", second), "repository:payments/x:pull,push")
        self.assertEqual(r.status, 200, r)
        claims = bt.jwt_claims(r.json()["token"])
        self.assertEqual(claims["access"], [], claims)
        self.assertEqual(claims["sub"], f"issuer:{SECOND}#system:serviceaccount:payments:builder")
        self.assertNotIn("namespace", claims)
        # A Dex token carrying a kubernetes.io claim is still the Dex user, not payments' account.
        forged = self.dex_token("builder", groups=["system:serviceaccounts"],
                                **{"kubernetes.io": {"namespace": "payments",
                                                     "serviceaccount": {"name": "builder", "uid": "x"}}})
        self.assertRefused(b, "payments/dex", bt.bearer(forged), "Dex token with a kubernetes.io claim")

    def test_f12_dex_admin_is_not_the_htpasswd_admin(self):
        b = self.start_without_new_keys()
        dex = self.dex_token()
        for headers in (bt.basic_auth("admin", dex), bt.bearer(dex)):
            scheme = headers["Authorization"].split()[0].lower()
            with self.subTest("Dex admin", scheme=scheme):
                self.assertRefused(b, f"admin-only/dex-{scheme}", headers, "Dex admin pushing admin-only/**")
                r = b.get("/v2/admin-only/x/manifests/v1", headers={**headers, "Accept": bt.OCI_MANIFEST})
                self.assertIn(r.status, (401, 403), f"Dex admin pulled admin-only/x: {r}")
                self.assertIn(b.get("/v2/admin-only/x/tags/list", headers=headers).status, (401, 403))
        r = token_request(b, bt.basic_auth("admin", dex), "repository:admin-only/x:pull,push")
        self.assertEqual(r.status, 200, r)
        claims = bt.jwt_claims(r.json()["token"])
        self.assertEqual((claims["sub"], claims["access"]), (f"issuer:{DEX}#admin", []), claims)
        self.assertEqual(b.get("/v2/admin-only/x/manifests/v1",
                               headers={**bt.bearer(r.json()["token"]), "Accept": bt.OCI_MANIFEST}).status, 401)
        # A Dex user named like the htpasswd admin gets no admin-only/** under any spelling of the claim.
        for username in ("Admin", " admin", "admin "):
            with self.subTest(preferred_username=username):
                self.assertRefused(b, "admin-only/y", bt.bearer(self.dex_token(username)), f"Dex {username!r}")
        # The qualified name is what a rule names to grant the Dex user something.
        self.assertEqual(push(b, "dex-admin/tool", bt.bearer(dex)), 201)

    def test_f12_new_keys_service_accounts_only_from_the_issuer_marked_so(self):
        platform_rule = {"repository": "platform/**", "principals": ["group:dex:platform"],
                         "actions": ["pull", "push"]}
        dex_rule = {"repository": "dex-admin/**", "principals": ["user:dex:admin"], "actions": ["pull", "push"]}
        b = self.start([self.issuer(CLUSTER, service_accounts=True), self.issuer(SECOND, service_accounts=False),
                        self.issuer(DEX, username_prefix="dex:", groups_prefix="dex:")],
                       [SA_RULE, ADMIN_RULE, ADMIN_READS, platform_rule, dex_rule])
        # The cluster's own account pushes in its namespace, and only there.
        own = bt.basic_auth("sa", self.sa_token(CLUSTER))
        self.assertEqual(push(b, "payments/app", own), 201)
        self.assertRefused(b, "billing/app", own, "the cluster's payments account in billing")
        r = token_request(b, own, "repository:payments/app:pull,push")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(bt.jwt_claims(r.json()["token"])["sub"], "system:serviceaccount:payments:builder")
        # The same claims from the second cluster: nothing, pushes and pulls alike.
        second = bt.basic_auth("sa", self.sa_token(SECOND))
        self.assertRefused(b, "payments/other", second, "second cluster's payments account")
        self.assertIn(b.get("/v2/payments/app/manifests/v1", headers=second).status, (401, 403))
        self.assertIn(b.get("/v2/payments/app/tags/list", headers=second).status, (401, 403))
        # Dex under its own prefix: dex:admin is granted by name, its groups as dex:NAME.
        dex = bt.bearer(self.dex_token("admin", groups=["platform"]))
        self.assertEqual(push(b, "dex-admin/tool", dex), 201)
        self.assertEqual(push(b, "platform/base", dex), 201)
        self.assertRefused(b, "admin-only/z", dex, "Dex admin under the dex: prefix")
        r = token_request(b, bt.basic_auth("x", self.dex_token("admin")), "repository:admin-only/x:pull,push")
        self.assertEqual(r.status, 200, r)
        claims = bt.jwt_claims(r.json()["token"])
        self.assertEqual((claims["sub"], claims["access"]), ("dex:admin", []), claims)
        # A Dex user calling itself system:serviceaccounts gets no namespace from it.
        posing = bt.bearer(self.dex_token("payments", groups=["system:serviceaccounts",
                                                              "system:serviceaccounts:payments"]))
        self.assertRefused(b, "payments/posing", posing, "Dex user in a group named system:serviceaccounts")


# --------------------------------------------------------------------------- htpasswd: 17


class HtpasswdTimingTest(unittest.TestCase):
    def test_f17_unknown_user_costs_a_bcrypt(self):
        def config(tmp):
            bt.write_htpasswd(os.path.join(tmp, "htpasswd"), {"alice": "alice-pw"})  # bcrypt cost 5
            with open(os.path.join(tmp, "htpasswd")) as f:
                self.assertTrue(f.read().startswith("alice:$2y$05$"))
            bt.gen_ec_key(os.path.join(tmp, "token.key"))
            return {"auth": {"htpasswd": "htpasswd", "token": TOKEN}}
        b = serve(config)
        self.addCleanup(b.cleanup)
        b.start()
        self.assertEqual(login(b, "alice", "alice-pw").status, 200)
        for path in ("/v2/", "/auth/token?service=berth&scope=repository:alice/app:pull"):
            with self.subTest(path=path):
                known, unknown = [], []
                for i in range(33):  # interleaved, so load on the machine weighs on both alike
                    for user, samples in (("alice", known), ("mallory", unknown)):
                        status, seconds, r = timed(b, "GET", path, bt.basic_auth(user, f"wrong-{path}-{i}"))
                        self.assertEqual(status, 401, f"{user}: {r}")
                        if i >= 3:  # the first few warm up
                            samples.append(seconds)
                k, u = statistics.median(known), statistics.median(unknown)
                self.assertEqual((len(known), len(unknown)), (30, 30))
                self.assertGreaterEqual(u, 0.5 * k, f"{path}: median unknown user {u * 1000:.2f} ms, "
                                                    f"known user with a wrong password {k * 1000:.2f} ms")


if __name__ == "__main__":
    unittest.main()
