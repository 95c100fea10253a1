"""The check registry: requirement levels, @check and @fixture.

Checks run category by category, in the order their category first registered a check, and within
a category in registration order (see checks/__init__.py for the order of the modules)."""

import types


MUST, SHOULD, EXT = "MUST", "SHOULD", "EXT"

CHECKS = []
FIXTURES = set()


def check(category, name, level, title):
    """Register a check; checks run in registration order."""
    def register(func):
        CHECKS.append(types.SimpleNamespace(
            id=f"{category}.{name}", category=category, level=level, title=title, func=func))
        return func
    return register


def fixture(func):
    """Mark a function as a fixture: run once per suite on first use, result cached."""
    FIXTURES.add(func)
    return func
