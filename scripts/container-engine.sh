#!/usr/bin/env bash
# A container engine for building and testing the image on one Debian host, as root:
# Debian's podman, buildah and runc, a containers.conf of the repo's own (CONTAINERS_CONF;
# /etc is never written) and a Python base image made locally with mmdebstrap, for hosts
# that reach no registry of base images. Idempotent: every step is skipped when done.
#
#   scripts/container-engine.sh [install]   packages, containers.conf, the base image
#       (BASE_IMAGE, default localhost/debian-python:3.11-bookworm; BASE_SUITE, bookworm)
#   scripts/container-engine.sh conf        print the containers.conf path (write it first)
#   scripts/container-engine.sh service SOCK
#       start `podman system service` on unix://SOCK in the background (pid in SOCK.pid)
#       and print the DOCKER_HOST URL once it answers
#   scripts/container-engine.sh stop SOCK   stop that service
#
# Why these settings (one host kind, checked): crun fails on a hybrid cgroup v1 layout,
# runc works; podman cannot raise the hard nofile limit, so the containers' limits are
# named; events go to a file since there may be no journald.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
STATE="$REPO/.tools/containers"
CONF="$STATE/containers.conf"

write_conf() {
    mkdir -p "$STATE"
    cat >"$CONF.new" <<'EOF'
# Written by scripts/container-engine.sh; used through CONTAINERS_CONF.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
    mv "$CONF.new" "$CONF"
}

install_packages() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v buildah >/dev/null || missing+=(buildah)
    command -v runc >/dev/null || missing+=(runc)
    command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
    if ((${#missing[@]})); then
        if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
            echo "container-engine: missing ${missing[*]}; install them (Debian: apt-get install" \
                "${missing[*]}) as root" >&2
            exit 1
        fi
        echo "== apt-get install ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# A minimal Debian with its python3 (3.11 in bookworm): what python:3.11-slim-bookworm
# gives, for a host that cannot pull it. Made once; podman keeps it.
make_base() {
    local image="${BASE_IMAGE:-localhost/debian-python:3.11-bookworm}"
    local suite="${BASE_SUITE:-bookworm}"
    export CONTAINERS_CONF="$CONF"
    if podman image exists "$image"; then
        echo "== base image $image: present"
        return
    fi
    echo "== base image $image: mmdebstrap $suite"
    local start=$SECONDS tar="$STATE/base.tar"
    mmdebstrap --quiet --variant=minbase \
        --include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates \
        "$suite" "$tar"
    podman import --quiet "$tar" "$image" >/dev/null
    rm -f "$tar"
    echo "   made in $((SECONDS - start)) s"
}

# The Docker Engine API of podman, for the tests and the docker executor: DOCKER_HOST.
start_service() {
    local sock="$1"
    export CONTAINERS_CONF="$CONF"
    mkdir -p "$(dirname "$sock")"
    rm -f "$sock"
    podman system service --time=0 "unix://$sock" >"$sock.log" 2>&1 &
    echo $! >"$sock.pid"
    for _ in $(seq 1 300); do
        if curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
            echo "unix://$sock"
            return
        fi
        if ! kill -0 "$(cat "$sock.pid")" 2>/dev/null; then
            echo "container-engine: podman system service exited:" >&2
            cat "$sock.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "container-engine: no answer on $sock after 30 s (log: $sock.log)" >&2
    exit 1
}

stop_service() {
    local pidfile="$1.pid"
    [ -f "$pidfile" ] || return 0
    kill "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile" "$1"
}

case "${1:-install}" in
install)
    install_packages
    write_conf
    make_base
    echo "CONTAINERS_CONF=$CONF"
    ;;
conf)
    [ -f "$CONF" ] || write_conf
    echo "$CONF"
    ;;
service) start_service "${2:?usage: $0 service /path/to/podman.sock}" ;;
stop) stop_service "${2:?usage: $0 stop /path/to/podman.sock}" ;;
*)
    echo "usage: $0 [install|conf|service SOCK|stop SOCK]" >&2
    exit 2
    ;;
esac
