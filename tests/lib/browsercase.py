"""The browser tests' harness (tests/browser/test_*.py): Debian's headless chromium driven by
chromedriver through python3-selenium, one browser per class (new_driver); BrowserTestCase waits
and finds on it and, when a test fails, leaves a screenshot and the page's text; screenshot()
saves pages to $BERTH_ARTIFACTS, else <directory of BERTH_BIN>/test-artifacts/ui/.

Waits are WebDriverWait polls, never sleeps. Importing this module in a Python without selenium (a
pyenv one first on PATH, as ctest runs it) runs the test again in Debian's /usr/bin/python3.
"""

import os
import sys
import unittest

import berthtest as bt

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, which has python3-selenium
try:
    from selenium import webdriver
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    # ctest runs the python3 first on PATH (a pyenv one, say): go on in Debian's instead.
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and os.access(SYSTEM_PYTHON, os.X_OK):
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
    raise

WAIT = 10  # seconds any page may take to show what a test waits for
WIDTH, HEIGHT = 1280, 1000


def new_driver():
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def wait_for(driver, predicate, what, timeout=WAIT):
    """Poll predicate (elements may go stale or be missing meanwhile) until it is truthy; return it."""
    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
        lambda _: predicate(), message=f"timed out after {timeout}s waiting for {what}")


def artifacts_dir():
    path = os.environ.get("BERTH_ARTIFACTS") or os.path.join(os.path.dirname(os.path.abspath(bt.BIN)),
                                                             "test-artifacts", "ui")
    os.makedirs(path, exist_ok=True)
    return path


def screenshot(driver, name, full=False):
    """Save the window (full: the whole page, the window made as tall as it) as NAME.png."""
    if full:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(WIDTH, max(HEIGHT, min(int(height) + 140, 6000)))
    try:
        path = os.path.join(artifacts_dir(), f"{name}.png")
        if not driver.save_screenshot(path):
            raise AssertionError(f"screenshot {path} not saved")
        return path
    finally:
        if full:
            driver.set_window_size(WIDTH, HEIGHT)


class BrowserTestCase(unittest.TestCase):
    """Waits and finds on the class's browser; a failed test leaves a screenshot and the page text."""

    driver = None

    def setUp(self):
        self.addCleanup(self.keep_evidence_on_failure)

    def keep_evidence_on_failure(self):
        if bt.failed(self) and self.driver is not None:
            name = "FAILED-" + self.id().rsplit(".", 1)[-1]
            try:
                print(f"\n{self.id()} failed at {self.driver.current_url}; screenshot "
                      f"{screenshot(self.driver, name)}; page text:\n{self.driver.find_element(By.TAG_NAME, 'body').text}",
                      file=sys.stderr)
            except Exception as e:  # evidence only: never hide the failure itself
                print(f"no evidence of {self.id()}: {e}", file=sys.stderr)

    def wait(self, predicate, what, timeout=WAIT):
        return wait_for(self.driver, predicate, what, timeout)

    def all(self, selector, within=None):
        return (within or self.driver).find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector, within=None):
        return (within or self.driver).find_element(By.CSS_SELECTOR, selector)

    def shown(self, selector):
        found = self.all(selector)
        return found[0] if found and found[0].is_displayed() else None

    def console_errors(self):
        """The browser's SEVERE console entries since the last call, but for failed requests
        (refusals a test causes on purpose are asserted by the test itself)."""
        return [e["message"] for e in self.driver.get_log("browser")
                if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]

    def assertCleanConsole(self):
        self.assertEqual(self.console_errors(), [], "errors in the browser's console")

