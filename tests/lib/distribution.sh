# shellcheck shell=bash
# shellcheck disable=SC2034  # variables set here are for the sourcing test
# A CNCF Distribution (Debian's docker-registry) on loopback as the upstream
# registry of berth's proxy tests; source after registry.sh.
#
#   start_upstream      -> UPSTREAM=127.0.0.1:PORT, UPSTREAM_URL, UPSTREAM_PID, UPSTREAM_LOG
#                          (plain HTTP, filesystem storage in a temp dir, access log on:
#                          one combined-log-format line per finished request)
#   stop_upstream       -> SIGTERM and wait; it stays down
#   upstream_requests RE  print the access-log lines whose request matches RE (grep -E)
#   upstream_seed DIR TAG NAME:TAG  skopeo copy of an OCI layout's TAG into the upstream

start_upstream() {
    local dir port attempt pid
    command -v docker-registry >/dev/null || skip "docker-registry (CNCF Distribution) not installed"
    make_tmpdir dir
    for attempt in 1 2 3; do
        port=$(free_port)
        UPSTREAM_LOG=$dir/upstream.$attempt.log  # one per attempt
        mkdir -p "$dir/data"
        cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  secret: berth-e2e-upstream
EOF
        docker-registry serve "$dir/config.yml" >"$UPSTREAM_LOG" 2>&1 &
        pid=$!
        add_cleanup "stop_pid $pid upstream"
        if wait_until 20 _registry_ready "http://127.0.0.1:$port" "$pid" && kill -0 "$pid" 2>/dev/null; then
            UPSTREAM="127.0.0.1:$port" UPSTREAM_URL="http://127.0.0.1:$port" UPSTREAM_PID=$pid
            dump_log_on_failure "$UPSTREAM_LOG" upstream
            log "upstream (docker-registry) ready at $UPSTREAM_URL"
            return 0
        fi
        kill -0 "$pid" 2>/dev/null && fail "upstream pid $pid did not answer GET /v2/ within 20 s"
        log "upstream exited early (attempt $attempt, port $port); retrying"
        tail -n 5 "$UPSTREAM_LOG" >&2
        wait "$pid" 2>/dev/null || true
    done
    fail "upstream did not start; see log above"
}

stop_upstream() {
    stop_pid "$UPSTREAM_PID" upstream
    if curl -s -o /dev/null --max-time 2 "$UPSTREAM_URL/v2/"; then
        fail "upstream still answers after it was stopped"
    fi
    log "upstream stopped"
}

upstream_requests() {
    grep -E "^[0-9.]+ [^ ]+ [^ ]+ \[[^]]+\] \"$1" "$UPSTREAM_LOG" || true
}

upstream_seed() {
    skopeo --insecure-policy copy --dest-tls-verify=false "oci:$1:$2" "docker://$UPSTREAM/$3" >&2
}
