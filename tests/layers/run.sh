#!/usr/bin/env bash
# The build keeps the layers apart (docs/architecture.md): each layer compiles
# against a view of include/berth/ holding only the layers it may use. This
# checks that the views still refuse what they must, and allow what they must:
# a header a layer may not see has to fail to compile from that layer's view.
#   tests/layers/run.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR}
views="$build/layer-views"
failures=0

# expect yes|no LAYER HEADER: whether an include of HEADER compiles in LAYER's
# view. A "no" must fail for the right reason: the header is not there.
expect() {
    local errors got=yes
    errors=$(echo "#include \"$3\"" | c++ -std=c++20 -fsyntax-only -I "$views/$2" -x c++ - 2>&1) || got=no
    if [ "$got" = no ] && ! grep -q "$3: No such file" <<<"$errors"; then got="error ($(head -1 <<<"$errors"))"; fi
    if [ "$got" = "$1" ]; then echo "ok: $2 $([ "$1" = yes ] && echo may || echo 'may not') include $3"
    else echo "FAIL: $2 including $3: $got, expected $1"; failures=$((failures + 1)); fi
}

# Upward includes.
expect no registry berth/replication/replicator.hpp
expect no registry berth/http/server.hpp
expect no storage berth/registry/registry.hpp
expect no oci berth/storage/blob_store.hpp
expect no net berth/replication/protocol.hpp
expect no replication berth/http/server.hpp
expect no auth berth/registry/registry.hpp
expect no registry berth/trust/verifier.hpp
expect no http berth/trust/verifier.hpp
expect yes node berth/trust/verifier.hpp
expect no transfer berth/http/server.hpp
expect no transfer berth/replication/replicator.hpp
expect no registry berth/transfer/transfer.hpp
expect yes transfer berth/registry/registry.hpp
expect yes transfer berth/net/client.hpp
expect no notify berth/http/server.hpp
expect no replication berth/notify/notifications.hpp
expect yes http berth/notify/notifications.hpp
# Private headers of another layer (no layer sees src/).
expect no http replication/applier.hpp
expect no http registry/upload_table.hpp
# What the layers do use.
expect yes registry berth/storage/meta_store.hpp
expect yes registry berth/registry/peers.hpp
expect yes replication berth/registry/peers.hpp
expect yes replication berth/storage/layout.hpp
expect yes http berth/replication/protocol.hpp
expect yes http berth/storage/page_cache.hpp

# RocksDB is storage's own: anywhere else its headers are refusals, not RocksDB.
refused() {
    local errors
    if errors=$(echo "#include <$2>" | c++ -std=c++20 -fsyntax-only -I "$views/$1" -x c++ - 2>&1); then
        echo "FAIL: $1 may include $2"; failures=$((failures + 1))
    elif grep -q "RocksDB is storage's own" <<<"$errors"; then echo "ok: $1 may not include $2"
    else echo "FAIL: $1 including $2: $(head -1 <<<"$errors")"; failures=$((failures + 1)); fi
}
refused registry rocksdb/db.h
refused http rocksdb/write_batch.h
refused replication rocksdb/utilities/checkpoint.h
expect yes storage rocksdb/db.h

# A relative include climbs past the views; only a layer's own folder may be named that way.
src=$(cd "$(dirname "$0")/../.." && pwd)
if climbing=$(grep -rn '#include "\.\./' "$src/src" "$src/include"); then
    echo "FAIL: relative includes out of a layer's folder:"; echo "$climbing"; failures=$((failures + 1))
else
    echo "ok: no include climbs out of its layer's folder"
fi

if [ "$failures" -ne 0 ]; then echo "layers: $failures check(s) failed"; exit 1; fi
echo "layers: every check passed"
