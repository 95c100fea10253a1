#!/usr/bin/env bash
# The shape docs/architecture.md promises, checked (each rule fails the run, naming FILE:LINE and the rule):
#   file-size          no C++ file in src/ over 600 lines; no source in tests/ or bench/ (C++, Python,
#                      shell, JavaScript; tracked or new, not ignored) over 800;
#   function-length    no function in src/ over 80 lines (Universal Ctags' line and end; a lambda counts);
#   metrics-writer     the Prometheus text format (# TYPE) written in one file, observe/metrics.cpp;
#   peer-json          peer JSON read or written only in replication/protocol*: no other replication file
#                      touches a JSON document;
#   peer-fields        and http, proxy, registry and node spell no peer wire field;
#   no-setters         collaborators given to constructors, never set afterwards (no `void set_*(` in src/ or include/);
#   no-friends         no `friend` in include/berth/registry/;
#   no-async           no std::async in src/ or include/ (threads are the scheduler's, the pools' and the owners');
#   dump-owners        no nlohmann `.dump(` in src/registry/ or src/storage/ but where an on-disk format is written;
#   peer-secret        the peer-secret header (Berth-Peer-Secret, any case) spelled only in replication and read
#                      only by src/http/request_head.cpp;
#   services-members   http::Services (include/berth/http/services.hpp) holds at most 6 data members;
#   blob-files         storage owns blob bytes: outside src/storage/ nothing spells a blob or scratch path, and
#                      the layers that carry blobs make no file call of their own (http's FileSender sends an
#                      OpenBlob's descriptor: the one exception).
# Rules about code (no-friends, no-async, dump-owners, peer-secret, blob-files) read it without comments (cxx_code.awk).
# RocksDB outside storage is the layers test's (tests/layers/run.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
lint=tests/lint
failed=()
ran=()
rule=

check() { rule=$1; ran+=("$1"); }
fail() {
    echo "FAIL [$rule] $*"
    [[ " ${failed[*]-} " == *" $rule "* ]] || failed+=("$rule")
}
# grep-style hits (FILE:LINE:TEXT) on stdin, each a failure: fail_hits WHY
fail_hits() {
    local file line text
    while IFS=: read -r file line text; do
        fail "$file:$line: $1: $(sed 's/^[[:space:]]*//; s/[[:space:]]*$//' <<<"$text")"
    done
}
cxx_files() { find "$@" \( -name '*.cpp' -o -name '*.hpp' \) -type f 2>/dev/null | sort; }
# Lines of C++ code, comments left out, matching an ERE: code_hits [-i] ERE DIR|FILE...  -> FILE:LINE:CODE
code_hits() {
    local icase=0
    [[ $1 == -i ]] && { icase=1; shift; }
    local pattern=$1
    shift
    cxx_files "$@" | xargs -r env PAT="$pattern" ICASE=$icase awk -f $lint/cxx_code.awk
}

check file-size
while read -r lines file; do
    [[ $file == total ]] && continue
    if ((lines > 600)); then fail "$file:601: the file is $lines lines (src/: at most 600)"; fi
done < <(cxx_files src | xargs wc -l)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    list_sources() { git ls-files -z --cached --others --exclude-standard -- tests bench; }
else
    list_sources() { find tests bench -type f -print0; }
fi
while read -r lines file; do
    [[ $file == total ]] && continue
    if ((lines > 800)); then fail "$file:801: the file is $lines lines (tests/ and bench/: at most 800)"; fi
done < <(list_sources | grep -zE '\.(cpp|hpp|cc|h|py|sh|js|mjs)$' | sort -zu |
    while IFS= read -r -d '' f; do [[ -f $f ]] && printf '%s\0' "$f"; done | xargs -0r wc -l)

check function-length
if ! command -v ctags-universal >/dev/null; then
    fail "ctags-universal is not installed: function lengths cannot be measured"
else
    # One tag a function: NAME FILE LINE;" f line:N [scope] ... end:M
    while IFS= read -r hit; do
        fail "$hit"
    done < <(ctags-universal --languages=C++ --kinds-C++=f --fields=+ne --excmd=number --sort=no -R -f - src |
        awk -F'\t' -v limit=80 '
        {
            line = end = 0; scope = ""; kind = ""
            for (i = 4; i <= NF; i++) {
                if ($i ~ /^line:/) line = substr($i, 6)
                else if ($i ~ /^end:/) end = substr($i, 5)
                else if ($i ~ /^(class|struct|union|function):/) { kind = substr($i, 1, index($i, ":") - 1); scope = substr($i, index($i, ":") + 1) }
            }
            if (!end) next
            length_ = end - line + 1
            if (length_ <= limit) next
            gsub(/(^|::)__anon[0-9a-f]+/, "", scope); sub(/^::/, "", scope)
            sub(/^berth::[a-z_]+::/, "", scope)
            name = $1
            if (name ~ /^__anon/) name = (kind == "function" && scope != "" ? "a lambda in " scope : "a lambda")
            else if (kind != "function" && scope != "") name = scope "::" name
            printf "%s:%d: %s is %d lines (functions in src/: at most %d)\n", $2, line, name, length_, limit
        }')
fi

check metrics-writer
fail_hits "the Prometheus text format written outside src/observe/metrics.cpp" \
    < <(grep -rn '# TYPE' src include | grep -v '^src/observe/metrics\.cpp:')
grep -q '# TYPE' src/observe/metrics.cpp || fail "src/observe/metrics.cpp:1: no longer writes # TYPE (it is the one writer)"

check peer-json
fail_hits "JSON handled in src/replication outside protocol*" \
    < <(cxx_files src/replication | grep -v 'replication/protocol' |
        xargs -r grep -Hn '\.at("\|\["[a-z_]*"\]\|\.value("\|json{\|json::parse\|\.dump(')
check peer-fields
peer_fields='entries|records|filling|epoch|seq|session|log_head|caught_up|lag_events|bytes_fetched|media_type|pulls|since|summary|incremental'
fail_hits "a peer wire field spelled outside replication/protocol*" \
    < <(grep -rnE "\"($peer_fields)\"" src/http src/proxy src/registry src/node)

check no-setters
fail_hits "a collaborator set after construction: give it to the constructor" \
    < <(grep -rnE 'void set_[a-z_]+\(' src include)

check no-friends
fail_hits "a friend in the registry's public headers: give the class what it needs through its interface" \
    < <(code_hits '(^|[^A-Za-z0-9_])friend([^A-Za-z0-9_]|$)' include/berth/registry)

check no-async
fail_hits "std::async: run it on the scheduler, a party pool or a thread its owner joins" \
    < <(code_hits 'std::async([^A-Za-z0-9_]|$)' src include)

check dump-owners
# The files that write an on-disk format with nlohmann's dump, each with what it writes.
# FILE alone allows every dump in it; FILE|ERE only the dumps on lines matching ERE.
dump_owners=(
    'src/storage/meta_codec.hpp'                  # the RocksDB values of tags, manifests, links, uploads
    'src/storage/usage_tally.cpp'                 # the RocksDB values of the usage tallies (blob, namespace, repository)
    'src/storage/events.cpp'                      # the change log's events, stored (and shipped to peers) as written
    'src/storage/backup.cpp|description\.dump\(2\)'  # a backup's backup.json
)
dumps_not_owned() {
    local file line text owner
    while IFS=: read -r file line text; do
        for owner in "${dump_owners[@]}"; do
            [[ $file == "${owner%%|*}" ]] || continue
            [[ $owner != *'|'* ]] && continue 2
            [[ $text =~ ${owner#*|} ]] && continue 2
        done
        echo "$file:$line:$text"
    done < <(code_hits '\.dump\(' src/registry src/storage)
}
fail_hits "JSON dumped outside the on-disk formats' owners (listed in this script)" < <(dumps_not_owned)

check peer-secret
# Replication owns the name (replication::protocol::header::secret); the server reads it in one place.
peer_secret_ok='^(src/replication/|include/berth/replication/|src/http/request_head\.cpp:)'
fail_hits "the peer-secret header spelled outside replication: use replication::protocol::header::secret" \
    < <({
        code_hits -i 'berth-peer-secret' src include
        grep -rniI --exclude='*.cpp' --exclude='*.hpp' 'berth-peer-secret' src include || true
    } | grep -vE "$peer_secret_ok")

check services-members
services=include/berth/http/services.hpp
if members=$(awk -f $lint/cxx_code.awk $services | NAME=Services awk -f $lint/struct_members.awk); then
    count=$(grep -c . <<<"$members" || true)
    if ((count > 6)); then
        start=$(grep -nE '(struct|class)[[:space:]]+Services([^A-Za-z0-9_;]|$)' $services | head -1 | cut -d: -f1)
        fail "$services:$start: http::Services has $count data members (at most 6):" \
            "$(awk -F'\t' '{printf "%s%s (line %s)", (NR > 1 ? ", " : ""), $2, $1}' <<<"$members")"
    fi
else
    fail "$services:1: no definition of struct Services found (moved? update this script)"
fi

check blob-files
blob_paths='layout::(blob_file|blobs_dir|scratch_dir|upload_file|fetch_file|is_fetch_file|quarantine_file|quarantine_dir)\(|(\.|->)scratch_dir\(|(^|[^A-Za-z0-9_])(fsync_path|hash_file)\(|blobs_?(\(\))?(\.|->)path\('
fail_hits "a blob or scratch path outside src/storage/: use BlobStore, BlobWriter, UploadFiles or OpenBlob" \
    < <(code_hits "$blob_paths" src include | grep -vE '^(src/storage/|include/berth/storage/)')
# `::open(` and not `Limits::open(`: a member's definition is not a file call.
file_calls='(^|[^A-Za-z0-9_:])::(open|openat|read|pread|write|pwrite|pwritev|fsync|ftruncate|unlink|rename|link|sendfile)\(|(std::filesystem|fs)::(remove|remove_all|rename|file_size|copy_file|exists|create_hard_link|directory_iterator)|std::[io]?fstream|(^|[^A-Za-z0-9_])fopen\(|(\.|->)release\(\)'
fail_hits "a file call in a layer that carries blobs: go through storage" \
    < <(code_hits "$file_calls" src/registry src/replication src/proxy src/trust src/ui src/http src/s3 \
            src/transfer/store_destination.cpp src/transfer/export.cpp |
        grep -vE '^(src/http/file_sender\.hpp:|src/http/server\.cpp:[0-9]+:.*/proc/sys/fs/nr_open|src/http/kernel_tls\.cpp:[0-9]+:.*/proc/sys/net/ipv4/tcp_available_ulp|src/trust/keys\.cpp:[0-9]+:.*ifstream in\(path)')

if ((${#failed[@]} == 0)); then
    echo "architecture: ok, ${#ran[@]} checks as docs/architecture.md says: ${ran[*]}"
    exit 0
fi
echo "architecture: FAILED ${failed[*]} (ran ${#ran[@]} checks: ${ran[*]})"
exit 1
