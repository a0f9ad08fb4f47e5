#!/usr/bin/env bash
# Build an image with whichever engine is here, then print its build time and size.
#
#   scripts/build-image.sh TAG DOCKERFILE CONTEXT [--build-arg K=V ...]
#
# ENGINE=buildah|podman|docker picks one; otherwise buildah, then podman (both with the
# repo's containers.conf, scripts/container-engine.sh), then docker. BUILD_FLAGS adds
# flags to the build command (e.g. --no-cache).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
TAG="${1:?usage: $0 TAG DOCKERFILE CONTEXT [build args]}"
DOCKERFILE="${2:?}"
CONTEXT="${3:?}"
shift 3

if [ -z "${ENGINE:-}" ]; then
    for candidate in buildah podman docker; do
        if command -v "$candidate" >/dev/null; then
            ENGINE=$candidate
            break
        fi
    done
fi
if [ -z "${ENGINE:-}" ]; then
    echo "build-image: no container engine (docker, podman or buildah) on PATH;" \
        "on Debian as root: scripts/container-engine.sh" >&2
    exit 1
fi
if [ "$ENGINE" != docker ] && [ -z "${CONTAINERS_CONF:-}" ]; then
    CONTAINERS_CONF="$(bash "$REPO/scripts/container-engine.sh" conf)"
    export CONTAINERS_CONF
fi

# RUN steps reach the package index through the host's network and CA bundle (a host
# behind a TLS-inspecting proxy trusts its CA there); chroot isolation and runc work
# on cgroup v1 hosts where the default OCI isolation with crun does not.
flags=()
case "$ENGINE" in
buildah) build=(buildah bud --layers --network host --isolation chroot --runtime runc) ;;
podman) build=(podman build --network host --isolation chroot --runtime runc) ;;
docker) build=(docker build --network host) ;;
*)
    echo "build-image: ENGINE=$ENGINE: expected buildah, podman or docker" >&2
    exit 1
    ;;
esac
if [ "$ENGINE" != docker ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    flags+=(-v /etc/ssl/certs:/etc/ssl/certs:ro)
fi
# shellcheck disable=SC2206  # BUILD_FLAGS is a list of flags by design
flags+=(${BUILD_FLAGS:-})

start=$SECONDS
echo "== $ENGINE: $TAG from $DOCKERFILE"
# The host's pip settings (a local index, find-links) must not leak into the build.
env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_CONFIG_FILE \
    "${build[@]}" "${flags[@]}" -f "$DOCKERFILE" -t "$TAG" "$@" "$CONTEXT"
elapsed=$((SECONDS - start))

inspect=(podman)
[ "$ENGINE" = docker ] && inspect=(docker)
size=$("${inspect[@]}" image inspect --format '{{.Size}}' "$TAG")
echo "== $TAG: built in ${elapsed} s, $((size / 1000000)) MB ($size bytes)"
