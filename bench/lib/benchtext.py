"""Text in and out of the bench scripts: numbers and markdown tables as they print them, the JSON
line berth-bench prints, and the report written to stdout and to a --markdown file."""

import json
import sys


def fmt(v, digits=1, sig_below_one=True):
    """A measurement for a table: thousands separated from 1,000, no decimals from 100, `digits`
    decimals below that; below 1 (not 0) three significant digits unless sig_below_one is False.
    None (not measured) is a dash."""
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if not sig_below_one:
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f}" if abs(v) >= 1 or v == 0 else f"{v:.3g}"


def ratio(a, b):
    """a / b, or None when either is missing or b is 0."""
    if a is None or b is None or b == 0:
        return None
    return a / b


def table(headers, rows):
    """A markdown table."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def last_json(stdout):
    """The last line of a tool's stdout that is a JSON object (berth-bench --json), parsed; None
    when there is none."""
    line = next((line for line in reversed(stdout.splitlines()) if line.startswith("{")), None)
    return json.loads(line) if line is not None else None


def emit(text, markdown=None, lead=""):
    """The report: to stdout (after lead), and to the file markdown when one is named."""
    sys.stdout.write(lead + text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text)
