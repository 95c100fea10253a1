#!/usr/bin/env python3
"""The web UI's events page in a real browser (headless chromium through tests/lib/browsercase.py):
one berth with two notification endpoints, one whose receiver takes events and one whose receiver
answers 410. After a push the page shows the first delivering with two events delivered, and the
second disabled, with the 410 as its last error. Waits are WebDriverWait polls.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import berthtest as bt  # noqa: E402
from browsercase import BrowserTestCase, new_driver, screenshot  # noqa: E402
from test_notifications import Receiver  # noqa: E402


class EventsPage(BrowserTestCase):
    def setUp(self):
        self.ok, self.gone = Receiver(self), Receiver(self, answer=410)
        self.b = bt.serve(self.addCleanup, {"notifications": {"endpoints": [
            {"name": "ci", "url": self.ok.url()}, {"name": "gone", "url": self.gone.url()}]}})
        self.driver = new_driver()
        self.addCleanup(self.driver.quit)

    def cell(self, name, css):
        rows = self.all(f'#endpoints tr.endpoint[data-name="{name}"]')
        return self.one(css, rows[0]).text if rows else None

    def test_endpoints_shown(self):
        self.b.push_image("app/web", "v1")
        self.driver.get(f"http://127.0.0.1:{self.b.port}/ui/#/events")
        self.wait(lambda: self.cell("ci", "td.delivered") == "2", "two events delivered to ci")
        self.assertIn("delivering", self.cell("ci", "td.state"))
        self.wait(lambda: "disabled" in (self.cell("gone", "td.state") or ""), "gone disabled by its 410")
        self.assertIn("410", self.cell("gone", "td.last-error"))
        screenshot(self.driver, "events-endpoints")
        self.assertCleanConsole()


if __name__ == "__main__":
    unittest.main(verbosity=2)
