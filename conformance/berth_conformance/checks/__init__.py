"""The checks, a module per category (push also has mount and blob_api, which adds pull checks too).

Importing this package registers every check in checklist.CHECKS. Categories run in the order
their first check registered, and the checks of a category in registration order, so the order
of the imports below is the order of a run: add a module where its category belongs.
"""

from ..checklist import CHECKS
from . import base, pull, push, mount, blob_api, manifests, discovery, referrers, management, errors, data, sparse
from . import readonly, catalog

MODULES = (base, pull, push, mount, blob_api, manifests, discovery, referrers, management, errors, data, sparse,
           readonly, catalog)
__all__ = ["CHECKS", "MODULES"]  # CHECKS: every check of MODULES, in registration order
