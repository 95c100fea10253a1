#!/usr/bin/env python3
"""The web UI's cluster page in a real browser (Debian's headless chromium, driven by chromedriver
through python3-selenium; tests/lib/browsercase.py) against three real replicas
(tests/lib/berthcluster.py). It proves (8; 1 to 7 and 9 are test_ui.py's) that the cluster page shows
all three ready, and that a killed replica is shown not ready and named under the problems within 10
seconds (the time it took is printed).

Screenshots go to $BERTH_ARTIFACTS, else <directory of BERTH_BIN>/test-artifacts/ui/. Waits are
WebDriverWait polls, never sleeps; the browser's console must stay free of errors other than
failed requests.
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import berthtest as bt  # noqa: E402
from browsercase import BrowserTestCase, new_driver, screenshot  # noqa: E402


class ClusterPage(BrowserTestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = bt.Cluster(3)
        cls.addClassCleanup(cls.cluster.cleanup)
        cls.cluster.start()
        cls.driver = new_driver()
        cls.addClassCleanup(cls.driver.quit)

    def ready_cells(self):
        return {tr.get_attribute("data-id"): self.one("td.ready", tr).text for tr in self.all("#replicas tr.replica")}

    def test_08_cluster_replica_killed(self):
        c = self.cluster
        self.driver.get(f"http://127.0.0.1:{c[0].port}/ui/#/cluster")
        want = {r.replica_id: "ready" for r in c}
        self.wait(lambda: self.ready_cells() == want, "three ready replicas")
        self.assertIsNotNone(self.shown("#healthy"))
        self.assertFalse(self.all("#problems"))
        self.assertEqual([tr.get_attribute("data-id") for tr in self.all("#replicas tr.replica.self")], ["berth-0"])
        addresses = {tr.get_attribute("data-id"): self.one("td.address", tr).text
                     for tr in self.all("#replicas tr.replica:not(.self)")}
        self.assertEqual(addresses, {r.replica_id: r.address for r in c.replicas[1:]})
        screenshot(self.driver, "cluster-healthy")

        c[2].kill()
        killed = time.monotonic()
        self.wait(lambda: self.ready_cells().get("berth-2") == "not ready"
                  and any("berth-2" in li.text for li in self.all("#problems li.problem")),
                  "berth-2 not ready and named under the problems", timeout=10)
        took = time.monotonic() - killed
        print(f"\ncluster page showed the killed replica not ready after {took:.2f}s", file=sys.stderr)
        cells = self.ready_cells()
        self.assertEqual(cells, {"berth-0": "ready", "berth-1": "ready", "berth-2": "not ready"})
        problems = [li.text for li in self.all("#problems li.problem")]
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("berth-2 does not answer", problems[0])
        self.assertFalse(self.all("#healthy"))
        row = self.one('#replicas tr.replica[data-id="berth-2"]')
        self.assertIn("unreachable", self.one("td.reachable", row).text)
        screenshot(self.driver, "cluster-replica-killed", full=True)
        self.assertCleanConsole()


if __name__ == "__main__":
    unittest.main(verbosity=2)
