# shellcheck shell=bash
# shellcheck disable=SC2034  # variables set here are for the sourcing test
# A private containerd (and dockerd on top of it), everything under one temp dir.
# Source after registry.sh.
#
#   start_containerd      -> CONTAINERD_DIR, CONTAINERD_SOCK; CTR=(ctr --address SOCK)
#   start_dockerd         -> DOCKER_HOST_SOCK; DOCKER=(docker -H unix://SOCK)
#                            (needs start_registry and start_containerd first)
#                            DOCKERD_REGISTRY_MIRRORS="URL..." (optional) goes into the
#                            daemon config's registry-mirrors (pulls from docker.io)

# Unix socket paths must stay under 108 bytes, so the daemons' dirs are made
# in /tmp whatever TMPDIR says.
start_containerd() {
    local d pid
    TMPDIR=/tmp make_tmpdir d
    CONTAINERD_DIR=$d
    CONTAINERD_SOCK=$d/containerd.sock
    mkdir -p "$d/root" "$d/state" "$d/opt"
    cat >"$d/config.toml" <<EOF
version = 2
root = "$d/root"
state = "$d/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$CONTAINERD_SOCK"

[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$d/opt"
EOF
    containerd --config "$d/config.toml" >"$d/containerd.log" 2>&1 &
    pid=$!
    add_cleanup "stop_pid $pid containerd"
    dump_log_on_failure "$d/containerd.log" containerd
    CTR=(ctr --address "$CONTAINERD_SOCK")
    if ! wait_until 20 "${CTR[@]}" version; then
        tail -n 20 "$d/containerd.log" >&2
        fail "containerd did not answer on $CONTAINERD_SOCK within 20 s"
    fi
    log "containerd ready on $CONTAINERD_SOCK"
}

start_dockerd() {
    local d pid
    [[ -n ${REGISTRY:-} ]] || fail "start_registry before start_dockerd"
    [[ -n ${CONTAINERD_SOCK:-} ]] || fail "start_containerd before start_dockerd"
    TMPDIR=/tmp make_tmpdir d
    DOCKERD_DIR=$d
    DOCKER_HOST_SOCK=$d/docker.sock
    mkdir -p "$d/data" "$d/exec" "$d/config"
    # Own config file, so /etc/docker/daemon.json is never read; the trust key
    # would otherwise be written to /etc/docker/key.json.
    jq -cn --arg key "$d/key.json" --arg mirrors "${DOCKERD_REGISTRY_MIRRORS:-}" '
        {"deprecated-key-path": $key}
        + (($mirrors | split(" ") | map(select(. != ""))) as $m
           | if ($m | length) > 0 then {"registry-mirrors": $m} else {} end)' >"$d/daemon.json"
    # dockerd always creates /run/docker/plugins: remove it afterwards unless
    # it was there before (a system dockerd may use it).
    [[ -e /run/docker ]] || add_cleanup "rmdir /run/docker/plugins /run/docker 2>/dev/null"
    dockerd \
        --config-file "$d/daemon.json" \
        --data-root "$d/data" \
        --exec-root "$d/exec" \
        --pidfile "$d/docker.pid" \
        -H "unix://$DOCKER_HOST_SOCK" \
        --containerd "$CONTAINERD_SOCK" \
        --storage-driver vfs \
        --iptables=false --ip6tables=false --ip-masq=false --bridge none \
        --exec-opt native.cgroupdriver=cgroupfs \
        --insecure-registry "$REGISTRY" \
        >"$d/dockerd.log" 2>&1 &
    pid=$!
    add_cleanup "stop_pid $pid dockerd"
    dump_log_on_failure "$d/dockerd.log" dockerd
    export DOCKER_CONFIG=$d/config DOCKER_BUILDKIT=0
    DOCKER=(docker -H "unix://$DOCKER_HOST_SOCK")
    if ! wait_until 30 "${DOCKER[@]}" info; then
        tail -n 20 "$d/dockerd.log" >&2
        fail "dockerd did not answer 'docker info' within 30 s"
    fi
    log "dockerd ready on $DOCKER_HOST_SOCK"
}
