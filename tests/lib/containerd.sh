# shellcheck shell=bash
# shellcheck disable=SC2034  # variables set here are for the sourcing test
# A private containerd (and dockerd on top of it), everything under one temp dir.
# Source after registry.sh.
#
#   start_containerd      -> CONTAINERD_DIR, CONTAINERD_SOCK; CTR=(ctr --address SOCK)
#   start_containerd_cri HOSTS_DIR
#                         -> the same, with the CRI plugin on (what the kubelet talks to):
#                            registry config_path = HOSTS_DIR (HOSTS_DIR/HOST[:PORT]/hosts.toml),
#                            native snapshotter, no CNI, no sandbox image (PullImage only needs
#                            the image service; drive it with tests/lib/cri.py)
#   start_dockerd         -> DOCKER_HOST_SOCK; DOCKER=(docker -H unix://SOCK)
#                            (needs start_registry and start_containerd first)
#                            DOCKERD_REGISTRY_MIRRORS="URL..." (optional) goes into the
#                            daemon config's registry-mirrors (pulls from docker.io)

# Unix socket paths must stay under 108 bytes, so the daemons' dirs are made
# in /tmp whatever TMPDIR says.
start_containerd() {
    local d
    TMPDIR=/tmp make_tmpdir d
    _containerd_config "$d" '"io.containerd.grpc.v1.cri"' >"$d/config.toml"
    _containerd_launch "$d"
}

# The CRI plugin's settings are containerd 1.6/1.7's (config version 2); containerd 2.x
# migrates them (registry and snapshotter move to io.containerd.cri.v1.images). With
# config_path set, the plugin ignores the deprecated registry.mirrors/configs tables.
start_containerd_cri() {
    local hosts_dir=${1:?start_containerd_cri HOSTS_DIR} d status
    [[ -d $hosts_dir ]] || fail "start_containerd_cri: $hosts_dir is not a directory"
    hosts_dir=$(cd "$hosts_dir" && pwd)
    TMPDIR=/tmp make_tmpdir d
    mkdir -p "$d/cni/bin" "$d/cni/conf.d"
    {
        _containerd_config "$d" ''
        cat <<EOF

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  # never pulled: only RunPodSandbox needs it
  sandbox_image = "sandbox-image.invalid/pause:none"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$d/cni/bin"
    conf_dir = "$d/cni/conf.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$hosts_dir"
EOF
    } >"$d/config.toml"
    _containerd_launch "$d"
    # A plugin that fails to initialise does not stop containerd: check that CRI loaded.
    status=$("${CTR[@]}" plugins ls 2>/dev/null |
        awk '$1 == "io.containerd.grpc.v1" && $2 == "cri" { print $NF }')
    if [[ $status != ok ]]; then
        grep -i 'cri' "$d/containerd.log" | tail -n 20 >&2
        fail "containerd's CRI plugin did not load (status '${status:-absent}'), see $d/containerd.log"
    fi
    CONTAINERD_HOSTS_DIR=$hosts_dir
    log "containerd with CRI ready on $CONTAINERD_SOCK (hosts dir $hosts_dir)"
}

# _containerd_config DIR DISABLED_PLUGINS : print the common config.toml, everything under DIR
# (the socket is DIR/containerd.sock); DISABLED_PLUGINS is the TOML array's inside.
_containerd_config() {
    local d=$1
    mkdir -p "$d/root" "$d/state" "$d/opt"
    cat <<EOF
version = 2
root = "$d/root"
state = "$d/state"
disabled_plugins = [$2]

[grpc]
  address = "$d/containerd.sock"

[ttrpc]
  address = "$d/containerd.sock.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$d/opt"
EOF
}

# _containerd_launch DIR : run containerd on DIR/config.toml, wait until it answers.
_containerd_launch() {
    local d=$1 pid
    CONTAINERD_DIR=$d
    CONTAINERD_SOCK=$d/containerd.sock
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
