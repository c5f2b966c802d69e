#!/usr/bin/env bash
# Installs every Debian package that kubetrain's build, tests and benchmarks need.
# Idempotent: when everything is present it prints nothing and exits 0.
# Uses sudo only when not running as root. The list is documented in DEVELOPERS.md.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential g++ cmake make pkg-config git ccache clang-format
  # gRPC and protobuf
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # libraries
  libabsl-dev libopenblas-dev zlib1g-dev libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libspdlog-dev libfmt-dev libssl-dev libcurl4-openssl-dev
  libcpprest-dev prometheus-cpp-dev libcivetweb-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # data, peers and tools used by tests
  dataset-fashion-mnist prometheus openmpi-bin iproute2 procps
  # chart tests (helm ships inside an npm tarball) and schema/CEL checks
  unzip
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js may come from another source (nodesource bundles npm); only ask Debian
# for it when no npm is on the PATH.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

echo "setup.sh: installing ${#missing[@]} missing package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup.sh: done"
