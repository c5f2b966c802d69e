#!/usr/bin/env bash
# Builds the two images from the Dockerfile, as `make image` does:
#   kubetrain:$VERSION           --target runtime
#   kubetrain-operator:$VERSION  --target operator
# VERSION is CMakeLists.txt's project VERSION. Extra arguments go to every `build`
# (e.g. --build-arg RUN_TESTS=1).
#
#   scripts/image.sh [build args...]   build both images
#   scripts/image.sh --engine          print the container command this machine uses, or exit 1
#                                      saying why there is none
#   scripts/image.sh --version         print VERSION
#
# The engine: $KUBETRAIN_CONTAINER_ENGINE when set (e.g. "podman"), else docker when its daemon
# answers (`docker info`; a docker CLI without a daemon is skipped), else podman. Podman needs no
# daemon; with runc installed it runs with `--runtime runc --cgroup-manager cgroupfs` (crun fails
# on VMs with hybrid cgroups) and builds with the host network, as
# ../shared/tools/container-build/ does. Base images missing from podman's storage and a registry
# that cannot be reached: set KUBETRAIN_DEBOOTSTRAP_BASES=1 to make debian:bookworm and
# debian:bookworm-slim locally with debootstrap (needs root or sudo).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION=$(sed -n 's/^project(kubetrain VERSION \([0-9][0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
[ -n "$VERSION" ] || { echo "image.sh: no project(kubetrain VERSION x.y.z) in CMakeLists.txt" >&2; exit 1; }

ENGINE=() BUILD_FLAGS=() WHY=""
pick_engine() {
  if [ -n "${KUBETRAIN_CONTAINER_ENGINE:-}" ]; then
    read -r -a ENGINE <<< "$KUBETRAIN_CONTAINER_ENGINE"
  elif command -v docker >/dev/null 2>&1 && timeout 20 docker info >/dev/null 2>&1; then
    ENGINE=(docker)
  elif command -v podman >/dev/null 2>&1; then
    ENGINE=(podman)
    if command -v runc >/dev/null 2>&1; then
      ENGINE+=(--runtime runc --cgroup-manager cgroupfs)
    fi
  else
    if command -v docker >/dev/null 2>&1; then
      WHY="docker is installed but its daemon does not answer (docker info failed) and podman is not installed"
    else
      WHY="neither docker nor podman is installed"
    fi
    return 1
  fi
  if [ "${ENGINE[0]}" = podman ] || [[ "${ENGINE[0]}" == */podman ]]; then
    BUILD_FLAGS=(--network host --ulimit nofile=20000:20000)
  fi
  # The Dockerfile's ccache cache mount (RUN --mount) needs BuildKit, docker's default builder
  # since 23.0 (with the buildx plugin); ask for it on older ones.
  export DOCKER_BUILDKIT=1
}

case "${1:-}" in
  --version) echo "$VERSION"; exit 0 ;;
  --engine)
    if pick_engine; then echo "${ENGINE[*]}"; exit 0; fi
    echo "$WHY"; exit 1 ;;
esac

pick_engine || { echo "image.sh: cannot build images here: $WHY" >&2; exit 1; }

# Podman without a registry: make the Debian bases locally when asked to.
if [ "${ENGINE[0]}" != docker ] && [ "${KUBETRAIN_DEBOOTSTRAP_BASES:-0}" = 1 ] &&
    ! "${ENGINE[@]}" image exists docker.io/library/debian:bookworm; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  command -v debootstrap >/dev/null || $SUDO apt-get install -y -qq debootstrap >/dev/null
  T=$(mktemp -d /var/tmp/bookworm.XXXXXX)
  URI=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  echo "image.sh: making debian:bookworm with debootstrap (about a minute)"
  $SUDO debootstrap --variant=minbase bookworm "$T" ${URI:+"$URI"} >/dev/null
  $SUDO mkdir -p "$T/usr/local/share/ca-certificates"
  $SUDO cp -L /usr/local/share/ca-certificates/* "$T/usr/local/share/ca-certificates/" 2>/dev/null || true
  $SUDO tar -C "$T" -c . | "${ENGINE[@]}" import - docker.io/library/debian:bookworm >/dev/null
  "${ENGINE[@]}" tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
  $SUDO rm -rf "$T"
fi

cd "$ROOT"
for target in operator runtime; do
  name=kubetrain; [ "$target" = operator ] && name=kubetrain-operator
  echo "image.sh: ${ENGINE[0]} build --target $target -t $name:$VERSION"
  start=$(date +%s)
  "${ENGINE[@]}" build "${BUILD_FLAGS[@]}" --target "$target" --build-arg "VERSION=$VERSION" \
    -t "$name:$VERSION" "$@" .
  echo "image.sh: $name:$VERSION built in $(( $(date +%s) - start ))s"
done
