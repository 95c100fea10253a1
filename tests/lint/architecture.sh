#!/usr/bin/env bash
# The shape docs/architecture.md promises, checked (each rule fails the run):
#   - no file in src/ over 600 lines, and no function over 100 (Universal Ctags' end lines);
#   - the Prometheus text format (# TYPE) written in one file, observe/metrics.cpp;
#   - peer JSON read or written only in replication/protocol*: no other replication file
#     touches a JSON document, and http, proxy, registry and node spell no peer wire field;
#   - collaborators given to constructors, never set afterwards (no `void set_*(` in src/ or include/).
# RocksDB outside storage is the layers test's (tests/layers/run.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
failed=0
fail() { echo "FAIL: $*"; failed=1; }

while read -r lines file; do
    [[ $file == total ]] && continue
    ((lines > 600)) && fail "$file has $lines lines (at most 600)"
done < <(find src -name '*.cpp' -o -name '*.hpp' | sort | xargs wc -l)

ctags-universal --output-format=json --fields=+ne --kinds-C++=f --sort=no -R -f - src |
    python3 -c '
import json, sys
bad = 0
for line in sys.stdin:
    tag = json.loads(line)
    if tag.get("_type") != "tag" or "end" not in tag:
        continue
    length = tag["end"] - tag["line"] + 1
    if length > 100:
        print("FAIL: %s:%d %s is %d lines (at most 100)" % (tag["path"], tag["line"], tag["name"], length))
        bad = 1
sys.exit(bad)' || failed=1

mapfile -t writers < <(grep -rl '# TYPE' src include || true)
[[ ${writers[*]-} == src/observe/metrics.cpp ]] || fail "# TYPE written in: ${writers[*]-none} (only src/observe/metrics.cpp)"

if grep -n '\.at("\|\["[a-z_]*"\]\|\.value("\|json{\|json::parse\|\.dump(' \
    $(find src/replication -name '*.cpp' -o -name '*.hpp' | grep -v 'replication/protocol'); then
    fail "JSON handled in src/replication outside protocol* (above)"
fi
peer_fields='entries|records|filling|epoch|seq|session|log_head|caught_up|lag_events|bytes_fetched|media_type|pulls|since|summary|incremental'
if grep -rnE "\"($peer_fields)\"" src/http src/proxy src/registry src/node; then
    fail "peer wire fields spelled outside replication/protocol* (above)"
fi

if grep -rnE 'void set_[a-z_]+\(' src include; then
    fail "a collaborator set after construction (above): give it to the constructor"
fi

((failed == 0)) && echo "architecture: sizes, metrics writer, peer formats and wiring as docs/architecture.md says"
exit $failed
