# shellcheck shell=bash
# shellcheck disable=SC2034  # variables set here are for the sourcing test
# Shared helpers for berth's end-to-end tests. Source it from a bash script:
#
#   . "$(dirname "$0")/../lib/registry.sh"
#   start_registry          # exports REGISTRY=127.0.0.1:PORT, REGISTRY_URL=http://...
#                           # and REGISTRY_DIR, REGISTRY_LOG (its log, one per start attempt)
#
# Which registry runs:
#   BERTH_BIN=path/to/berth         -> "$BERTH_BIN" serve --listen 127.0.0.1:PORT --root DIR
#                                      (plus --config "$BERTH_CONFIG" when that is set; then an
#                                      anonymous GET /v2/ answering 401 counts as ready too)
#   REGISTRY_IMPL=distribution      -> docker-registry serve CONFIG (CNCF Distribution)
#
# Cleanup: everything registered with add_cleanup runs (last first) from one
# EXIT trap, on success and on failure alike.

shopt -s inherit_errexit

# ---------------------------------------------------------------- basics

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
skip() { printf 'SKIP: %s\n' "$*" >&2; exit 77; }

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
    if [[ "$1" != "$2" ]]; then
        fail "${3:-value}: expected '$1', got '$2'"
    fi
    log "ok: ${3:-value} = $2"
}

# assert_ne A B [WHAT]
assert_ne() {
    if [[ "$1" == "$2" ]]; then
        fail "${3:-value}: did not expect '$1'"
    fi
}

# need CMD... : skip the test (exit 77) if a client binary is missing.
need() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || skip "'$c' not installed"
    done
}

# require CMD... : fail (not skip) if a tool the tests themselves use is missing.
require() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || fail "'$c' not installed (needed by the e2e tests)"
    done
}
require curl jq tar gzip sha256sum

# wait_until TIMEOUT_SECONDS CMD... : poll CMD every 0.1 s until it succeeds.
wait_until() {
    local timeout=$1; shift
    local deadline=$((SECONDS + timeout))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

# ---------------------------------------------------------------- cleanup

_E2E_CLEANUPS=()
add_cleanup() { _E2E_CLEANUPS+=("$*"); }

_e2e_run_cleanups() {
    local rc=$? i
    trap - ERR
    set +e
    for ((i = ${#_E2E_CLEANUPS[@]} - 1; i >= 0; i--)); do
        eval "${_E2E_CLEANUPS[i]}"
    done
    if ((rc == 0)); then
        log "PASS: $(basename "$0") (${SECONDS}s)"
    elif ((rc == 77)); then
        log "SKIPPED: $(basename "$0")"
    else
        log "FAILED: $(basename "$0") exit $rc (${SECONDS}s)"
    fi
    exit "$rc"
}
trap _e2e_run_cleanups EXIT
# name the command that failed when set -e ends the script
set -E
trap 'printf "FAIL: exit %s from \"%s\" (%s line %s)\n" "$?" "$BASH_COMMAND" "$(basename "${BASH_SOURCE[0]}")" "$LINENO" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# make_tmpdir VAR : create a temp dir, store its path in VAR, remove it at exit
# (unmounting anything left mounted below it first).
make_tmpdir() {
    local _mt_dir
    _mt_dir=$(mktemp -d "${TMPDIR:-/tmp}/berth-e2e.XXXXXX")
    add_cleanup "remove_tree '$_mt_dir'"
    printf -v "$1" '%s' "$_mt_dir"
}

# remove_tree DIR : unmount everything below DIR (deepest first), then rm -rf.
remove_tree() {
    local dir=$1 m
    [[ -d $dir ]] || return 0
    awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts |
        sort -r | while read -r m; do umount -l "$m" 2>/dev/null; done
    rm -rf "$dir" 2>/dev/null || { chattr -R -i "$dir" 2>/dev/null; rm -rf "$dir"; }
}

# stop_pid PID [NAME] : SIGTERM, wait up to 10 s, then SIGKILL.
stop_pid() {
    local pid=$1 i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "${2:-process} $pid ignored SIGTERM; killing"
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null || true
}

# dump_log_on_failure FILE NAME : at exit, if the test failed, show the log tail.
dump_log_on_failure() {
    add_cleanup "_e2e_dump_log '$1' '$2'"
}
_e2e_dump_log() {
    # $rc of the exiting script is visible here through _e2e_run_cleanups' local.
    if [[ ${rc:-0} != 0 && ${rc:-0} != 77 && -s $1 ]]; then
        printf -- '----- last lines of %s log (%s) -----\n' "$2" "$1" >&2
        tail -n 30 "$1" >&2
        printf -- '-----\n' >&2
    fi
}

# ---------------------------------------------------------------- ports

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port : print a TCP port on 127.0.0.1 that nothing listens on, outside the kernel's
# ephemeral range: on a busy machine outgoing connections take ephemeral ports between this
# probe and the server's bind ("Address already in use").
free_port() {
    local lo=32768 hi=60999 first span p i
    read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    if ((lo - 10000 >= 4096)); then first=10000 span=$((lo - 10000))
    else first=$((hi + 1)) span=$((65536 - hi - 1)); fi
    for ((i = 0; i < 200; i++)); do
        p=$((first + (RANDOM * 32768 + RANDOM) % span))
        port_in_use "$p" || { echo "$p"; return 0; }
    done
    fail "no free port found"
}

# ---------------------------------------------------------------- registry

# _registry_ready URL PID : GET /v2/ answers 200 (or 401 with BERTH_CONFIG, which may turn
# on authentication), or PID has exited (checked after).
_registry_ready() {
    kill -0 "$2" 2>/dev/null || return 0
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1/v2/")
    [[ $code == 200 || ( -n ${BERTH_CONFIG:-} && $code == 401 ) ]]
}

# Extra curl options for the helpers below (manifest_digest, get_manifest), e.g.
# REGISTRY_CURL_OPTS=(-u alice:secret) against a registry with authentication.
REGISTRY_CURL_OPTS=()

# start_registry : start the registry under test on a free loopback port.
start_registry() {
    local dir port attempt pid
    make_tmpdir dir
    REGISTRY_DIR=$dir
    for attempt in 1 2 3; do
        port=$(free_port)
        # one log per attempt: a failed attempt's lines never end up in the log a test reads
        REGISTRY_LOG=$dir/registry.$attempt.log
        if [[ -n ${BERTH_BIN:-} ]]; then
            # absolute, so a test may cd; a bare name is looked up in PATH
            if [[ $BERTH_BIN == */* ]]; then
                BERTH_BIN=$(realpath "$BERTH_BIN")
            else
                command -v "$BERTH_BIN" >/dev/null || fail "BERTH_BIN: '$BERTH_BIN' not found in PATH"
                BERTH_BIN=$(command -v "$BERTH_BIN")
            fi
            [[ -x $BERTH_BIN ]] || fail "BERTH_BIN=$BERTH_BIN is not an executable"
            mkdir -p "$dir/root"
            local config_args=()
            [[ -n ${BERTH_CONFIG:-} ]] && config_args=(--config "$BERTH_CONFIG")
            "$BERTH_BIN" serve "${config_args[@]}" --listen "127.0.0.1:$port" --root "$dir/root" \
                >"$REGISTRY_LOG" 2>&1 &
        elif [[ ${REGISTRY_IMPL:-} == distribution ]]; then
            command -v docker-registry >/dev/null || fail "REGISTRY_IMPL=distribution needs docker-registry (apt-get install docker-registry)"
            mkdir -p "$dir/data"
            cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
EOF
            env -u REGISTRY_IMPL docker-registry serve "$dir/config.yml" >"$REGISTRY_LOG" 2>&1 &
        else
            fail "set BERTH_BIN=path/to/berth or REGISTRY_IMPL=distribution"
        fi
        pid=$!
        add_cleanup "stop_pid $pid registry"
        REGISTRY_PID=$pid
        if wait_until 20 _registry_ready "http://127.0.0.1:$port" "$pid" && kill -0 "$pid" 2>/dev/null; then
            export REGISTRY="127.0.0.1:$port" REGISTRY_URL="http://127.0.0.1:$port"
            dump_log_on_failure "$REGISTRY_LOG" registry
            log "registry (${BERTH_BIN:-distribution}) ready at $REGISTRY_URL"
            return 0
        fi
        if kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$REGISTRY_LOG" >&2
            fail "registry pid $pid did not answer GET /v2/ with 200${BERTH_CONFIG:+ or 401} within 20 s"
        fi
        log "registry exited early (attempt $attempt, port $port); retrying"
        tail -n 5 "$REGISTRY_LOG" >&2
        wait "$pid" 2>/dev/null || true
    done
    fail "registry did not start; see log above"
}

MANIFEST_ACCEPT=application/vnd.oci.image.index.v1+json,application/vnd.oci.image.manifest.v1+json,application/vnd.docker.distribution.manifest.list.v2+json,application/vnd.docker.distribution.manifest.v2+json

# manifest_digest REPO REF : the Docker-Content-Digest header of HEAD on a manifest.
manifest_digest() {
    curl -sfI "${REGISTRY_CURL_OPTS[@]}" -H "Accept: $MANIFEST_ACCEPT" "$REGISTRY_URL/v2/$1/manifests/$2" |
        tr -d '\r' | awk 'tolower($1) == "docker-content-digest:" { print $2 }'
}

# get_manifest REPO REF : print the manifest body.
get_manifest() {
    curl -sf "${REGISTRY_CURL_OPTS[@]}" -H "Accept: $MANIFEST_ACCEPT" "$REGISTRY_URL/v2/$1/manifests/$2"
}
