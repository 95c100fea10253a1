"""python3 -m berth_conformance URL [options]; also the __main__.py of berth-conformance.pyz."""

import sys

from berth_conformance.cli import main

sys.exit(main())
