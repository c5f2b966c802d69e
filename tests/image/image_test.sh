#!/usr/bin/env bash
# Image smoke tests (CTest label `image`): build the images with `make image`'s script and run them.
#   image_test.sh SOURCE_DIR build            scripts/image.sh: both images from the Dockerfile
#   image_test.sh SOURCE_DIR runtime          kubetrain:<version> as a user would run it
#   image_test.sh SOURCE_DIR operator         kubetrain-operator:<version>
#   image_test.sh SOURCE_DIR missing-library  the runtime build with one package dropped fails
# Prints "SKIP: <why>" and exits 0 when neither a working docker nor podman is here
# (scripts/image.sh --engine decides, as `make image` does) or KUBETRAIN_SKIP_IMAGE_TESTS is set.
set -uo pipefail
SRC=$1 MODE=$2
cd "$SRC" || exit 1
if [ -n "${KUBETRAIN_SKIP_IMAGE_TESTS:-}" ]; then
  echo "SKIP: KUBETRAIN_SKIP_IMAGE_TESTS is set"
  exit 0
fi
if ! ENGINE_LINE=$(scripts/image.sh --engine); then
  echo "SKIP: no container engine can build images here: $ENGINE_LINE"
  exit 0
fi
read -r -a E <<< "$ENGINE_LINE"
V=$(scripts/image.sh --version)
RT=kubetrain:$V OP=kubetrain-operator:$V
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
finish() { [ "$fails" = 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }; }
run() { "${E[@]}" run --rm --network none "$@"; }
need_image() {
  "${E[@]}" image inspect "$1" > /dev/null 2>&1 ||
    { echo "FAIL: image $1 does not exist: the image_build test builds it (make image)"; exit 1; }
}
inspect() { "${E[@]}" image inspect --format "$2" "$1"; }
size_mb() { echo "$(( $(inspect "$1" '{{.Size}}') / 1000000 )) MB"; }
# No library "not found" inside the image.
check_ldd() {
  local out
  if ! out=$(run --entrypoint ldd "$1" "$2" 2>&1); then bad "ldd $2 in $1: $out"
  elif grep -q "not found" <<< "$out"; then bad "ldd $2 in $1: $(grep "not found" <<< "$out")"
  else ok "ldd in $1 finds all $(grep -c '=>' <<< "$out") libraries of $2"; fi
}
check_config() {  # image, binary
  local user entry
  user=$(inspect "$1" '{{.Config.User}}') entry=$(inspect "$1" '{{json .Config.Entrypoint}}')
  [ "$user" = 65532:65532 ] && ok "$1 USER $user" || bad "$1 USER is '$user', not 65532:65532"
  [ "$entry" = "[\"$2\"]" ] && ok "$1 ENTRYPOINT $entry" || bad "$1 ENTRYPOINT is $entry"
  local id
  id=$(run --entrypoint id "$1" 2>&1)
  [[ "$id" =~ ^uid=65532(\([a-z]+\))?\ gid=65532 ]] && ok "$1 runs as: $id" || bad "$1 runs as: $id"
  for l in title description version; do
    local v; v=$(inspect "$1" "{{index .Config.Labels \"org.opencontainers.image.$l\"}}")
    [ -n "$v" ] && ok "label org.opencontainers.image.$l=$v" || bad "$1 has no org.opencontainers.image.$l label"
  done
  [ "$(inspect "$1" '{{index .Config.Labels "org.opencontainers.image.version"}}')" = "$V" ] ||
    bad "$1's version label is not $V"
}

case "$MODE" in
build)
  start=$(date +%s)
  # No registry here: make the Debian bases locally when they are missing.
  KUBETRAIN_DEBOOTSTRAP_BASES=1 scripts/image.sh || { echo "FAIL: scripts/image.sh"; exit 1; }
  echo "both images built in $(( $(date +%s) - start ))s with ${E[0]}"
  echo "sizes: $RT $(size_mb "$RT"), $OP $(size_mb "$OP")"
  ;;

runtime)
  need_image "$RT"
  echo "$RT: $(size_mb "$RT")"
  check_config "$RT" /usr/local/bin/kubetrain
  check_ldd "$RT" /usr/local/bin/kubetrain
  out=$(run "$RT" --version 2>&1)
  [ "$out" = "kubetrain $V" ] && ok "--version: $out" || bad "--version printed: $out"
  # One epoch of the mlp on the bundled Fashion-MNIST, read-only root filesystem as in a pod.
  start=$(date +%s)
  out=$(run --read-only --tmpfs /tmp "$RT" train --model mlp --epochs 1 --metrics-port 0 --log-every 0 2>&1)
  rc=$?
  acc=$(grep -o 'final test_accuracy=[0-9.]*' <<< "$out" | tail -1 | cut -d= -f2)
  echo "train: exit $rc in $(( $(date +%s) - start ))s; $(tail -1 <<< "$out")"
  if [ "$rc" = 0 ] && awk -v a="${acc:-0}" 'BEGIN {exit !(a >= 0.75)}'; then
    ok "mlp, 1 epoch, test accuracy $acc >= 0.75"
  else
    bad "train: exit $rc, accuracy '${acc}': $out"
  fi
  # The PS example (1 PS + 2 workers, 10 epochs) as it is, under `kubetrain run`.
  start=$(date +%s)
  out=$(run -v "$SRC/examples/fmnist-ps-sync.yaml:/job/fmnist-ps-sync.yaml:ro" "$RT" run /job/fmnist-ps-sync.yaml 2>&1)
  rc=$?
  acc=$(grep -o 'final test_accuracy=[0-9.]*' <<< "$out" | tail -1 | cut -d= -f2)
  echo "kubetrain run: exit $rc in $(( $(date +%s) - start ))s; $(tail -1 <<< "$out")"
  if [ "$rc" = 0 ] && awk -v a="${acc:-0}" 'BEGIN {exit !(a >= 0.85)}'; then
    ok "kubetrain run examples/fmnist-ps-sync.yaml: test accuracy $acc >= 0.85"
  else
    bad "kubetrain run: exit $rc, accuracy '${acc}': $(tail -30 <<< "$out")"
  fi
  finish
  ;;

operator)
  need_image "$OP"
  echo "$OP: $(size_mb "$OP")"
  check_config "$OP" /usr/local/bin/kubetrain-operator
  check_ldd "$OP" /usr/local/bin/kubetrain-operator
  out=$(run "$OP" --version 2>&1)
  [ "$out" = "kubetrain-operator $V" ] && ok "--version: $out" || bad "--version printed: $out"
  out=$(run "$OP" --help 2>&1)
  rc=$?
  [ "$rc" = 0 ] && grep -q -- "--namespace" <<< "$out" && ok "--help: $(head -1 <<< "$out")" ||
    bad "--help: exit $rc: $out"
  # Slim: no gRPC runtime, OpenBLAS or dataset.
  out=$(run --entrypoint sh "$OP" -c \
    'ls /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/openblas-pthread 2>/dev/null | grep -E "grpc|openblas|protobuf"; ls -d /usr/share/datasets 2>/dev/null' 2>&1)
  [ -z "$out" ] && ok "no gRPC, protobuf, OpenBLAS or dataset in $OP" || bad "$OP holds: $out"
  finish
  ;;

missing-library)
  need_image "$RT"
  # The real Dockerfile's runtime stage with libyaml-cpp's package left out of the list it
  # installs (DROP_PACKAGE); the build stage comes from the layer cache.
  pkg=libyaml-cpp0.7
  out=$(scripts/image.sh --build-arg "DROP_PACKAGE=$pkg" 2>&1 | tail -20)
  if grep -q "image.sh: kubetrain:$V built" <<< "$out"; then
    bad "the runtime image built without $pkg"
    "${E[@]}" rmi -f "$RT" > /dev/null 2>&1  # do not leave the broken image behind
  elif grep -q "libyaml-cpp.so.0.7 not found by the dynamic loader" <<< "$out"; then
    ok "without $pkg the build fails naming the library:"
    grep -A3 "lib-packages:" <<< "$out" | sed 's/^/    /'
  else
    bad "the build without $pkg failed, but not naming libyaml-cpp.so.0.7: $out"
  fi
  finish
  ;;
*) echo "usage: $0 SOURCE_DIR build|runtime|operator|missing-library" >&2; exit 2 ;;
esac
