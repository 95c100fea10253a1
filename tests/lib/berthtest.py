"""Shared helpers for berth's integration and fault tests and the bench scripts: `import berthtest
as bt` reaches every one of them. Standard library only.

They live by concern in this directory:
  berthserver.py   one berth process on a free loopback port with a temporary root: start, wait
                   until GET /v2/ answers, stop, kill, restart; run_cli; free_port; poll
  berthhttp.py     Resp, Location and query helpers, parse_metrics, raw-socket requests
  berthimage.py    random OCI images to push; the blob files under a root
  berthcluster.py  Cluster and Replica: N peered replicas, frozen, killed, wiped, restarted
  berthauth.py     Basic/Bearer headers, htpasswd, keys, a CA and certificates, JWTs
  berthcase.py     serve(): a berth with its htpasswd and config, started and removed on cleanup;
                   ServerTest: a TestCase whose class shares one such berth, cls.b; failed(test)

Every process started by them is killed and every temporary directory removed on cleanup,
including when a test fails. Tests wait with poll() on what they wait for, never with a sleep.
"""

import berthauth
import berthcase
import berthcluster
import berthhttp
import berthimage
import berthserver

__all__ = []
for _module in (berthserver, berthhttp, berthimage, berthcluster, berthauth, berthcase):
    globals().update({name: getattr(_module, name) for name in _module.__all__})
    __all__ += _module.__all__
del _module
