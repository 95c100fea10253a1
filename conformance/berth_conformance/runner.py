"""Runs the selected checks and prints one line per check, then the totals."""

import http.client

from .checklist import EXT, MUST, SHOULD
from .expect import Failure, Skipped


def run(suite, checks):
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    failed_levels = {MUST: 0, SHOULD: 0, EXT: 0}
    for c in checks:
        try:
            c.func(suite)
            outcome, reason = "PASS", ""
        except Failure as err:
            outcome, reason = "FAIL", str(err)
        except Skipped as err:
            outcome, reason = "SKIP", str(err)
        except (OSError, http.client.HTTPException) as err:
            outcome, reason = "FAIL", f"request failed: {err!r}"
        counts[outcome] += 1
        if outcome == "FAIL":
            failed_levels[c.level] += 1
        line = f"{outcome} {c.id} [{c.level}] {c.title}"
        print(line + (f" -- {reason}" if reason else ""), flush=True)
    print(f"failed by level: MUST {failed_levels[MUST]}, SHOULD {failed_levels[SHOULD]}, EXT {failed_levels[EXT]}")
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    return failed_levels
