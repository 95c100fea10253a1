"""The boilerplate of a test that starts berth, written once: serve() makes a berth, has it removed
on cleanup, writes its htpasswd and config and starts it; ServerTest is a TestCase whose class
shares one berth, started so in setUpClass as cls.b; failed(test) tells a cleanup that prints
logs or keeps evidence whether the test failed.

    class RulesTest(bt.ServerTest):
        passwords = {"alice": "alice-pw"}  # written to htpasswd in the server's directory
        config = {"auth": {"htpasswd": "htpasswd", "rules": RULES}}  # relative: to that directory

        @classmethod
        def setUpClass(cls):
            super().setUpClass()  # cls.b answers (GET /v2/ is 401: the config has auth)
            cls.image = cls.b.push_image("alice/app", "v1")

A class whose config names files it makes itself (keys, certificates) overrides configure(b)
instead: it writes them into b.tmp (and may set b.ssl_context) and returns the config.

Standard library only; part of `import berthtest as bt` (see berthtest.py).
"""

import copy
import os
import unittest

from berthauth import write_htpasswd
from berthserver import Berth

__all__ = ["serve", "ServerTest", "failed"]


def serve(add_cleanup, config=None, passwords=None, ready_statuses=None, **berth_args):
    """A started berth (bt.Berth(**berth_args)), removed by add_cleanup: a test's addCleanup or a
    class's addClassCleanup.

    passwords ({user: password}) are written to htpasswd in its directory (b.tmp) first. config is
    a dict, or a function config(b) that writes what the config names into b.tmp (setting
    b.ssl_context for TLS) and returns it. ready_statuses: what GET /v2/ answers the anonymous
    readiness probe; by default (401,) where the config has an auth section, else (200,)."""
    b = Berth(**berth_args)
    add_cleanup(b.cleanup)
    if passwords is not None:
        write_htpasswd(os.path.join(b.tmp, "htpasswd"), passwords)
    b.config = dict((config(b) if callable(config) else config) or {})
    if ready_statuses is not None:
        b.ready_statuses = tuple(ready_statuses)
    elif "auth" in b.config:
        b.ready_statuses = (401,)
    return b.start()


class ServerTest(unittest.TestCase):
    """One berth for all the tests of a class: cls.b, started in setUpClass by serve() with the
    class's passwords, configure(b) (by default a copy of its config) and ready_statuses, and
    removed after the last of them. A subclass that does more in setUpClass calls
    super().setUpClass() where the berth is to start (first, unless it needs servers started before)."""

    passwords = None  # {user: password}: written to htpasswd in the server's directory
    config = None  # the server's config (or override configure)
    ready_statuses = None  # None: (401,) where the config has auth, else (200,)
    b = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = serve(cls.addClassCleanup, cls.configure, cls.passwords, cls.ready_statuses)

    @classmethod
    def configure(cls, b):
        """The config of the class's berth b; writes into b.tmp whatever file it names."""
        return copy.deepcopy(cls.config)


def failed(testcase):
    """Whether testcase (running its cleanups now) failed or raised."""
    result = getattr(getattr(testcase, "_outcome", None), "result", None)
    return result is not None and any(t is testcase for t, _ in result.failures + result.errors)
