#!/bin/bash
# scripts/kube-control-plane.sh finds a control plane in envtest's order:
# KUBETRAIN_TEST_KUBECONFIG, then KUBEBUILDER_ASSETS, then KUBETRAIN_KUBE_CONTROL_PLANE, else none;
# an existing cluster is used as it is (nothing started, nothing stopped). With ASSETS_FROM_TOOL
# (a kube-control-plane tool folder) it also starts a real control plane from a KUBEBUILDER_ASSETS
# folder made of that tool's binaries and checks that those binaries are what runs.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KCP=$ROOT/scripts/kube-control-plane.sh
T=$(mktemp -d)
started=""
cleanup() {
  [ -n "$started" ] && "$KCP" stop "$started" >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT
fails=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: want '$2', got '$3'"; fails=$((fails + 1)); fi
}
unset KUBETRAIN_TEST_KUBECONFIG KUBEBUILDER_ASSETS KUBETRAIN_KUBE_CONTROL_PLANE

mkdir -p "$T/tool/bin" "$T/assets" "$T/empty"
: >"$T/tool/bin/kube-apiserver.xz"
printf '#!/bin/sh\nexit 0\n' >"$T/assets/kube-apiserver"
cp "$T/assets/kube-apiserver" "$T/assets/etcd"
chmod +x "$T/assets/kube-apiserver" "$T/assets/etcd"
echo "apiVersion: v1" >"$T/kubeconfig"

out=$("$KCP" find)
check "nothing set: none" none "${out%% *}"
case "$out" in *KUBETRAIN_TEST_KUBECONFIG*KUBEBUILDER_ASSETS*KUBETRAIN_KUBE_CONTROL_PLANE*) echo "ok: none names the three variables" ;;
  *) echo "FAIL: none does not name the variables: $out"; fails=$((fails + 1)) ;; esac
check "tool" "tool $T/tool" "$(KUBETRAIN_KUBE_CONTROL_PLANE=$T/tool "$KCP" find)"
check "a tool folder that does not exist: none" none \
  "$(KUBETRAIN_KUBE_CONTROL_PLANE=$T/missing "$KCP" find | cut -d' ' -f1)"
check "assets win over the tool" "assets $T/assets" \
  "$(KUBEBUILDER_ASSETS=$T/assets KUBETRAIN_KUBE_CONTROL_PLANE=$T/tool "$KCP" find)"
check "kubeconfig wins over both" "kubeconfig $T/kubeconfig" \
  "$(KUBETRAIN_TEST_KUBECONFIG=$T/kubeconfig KUBEBUILDER_ASSETS=$T/assets \
    KUBETRAIN_KUBE_CONTROL_PLANE=$T/tool "$KCP" find)"
err=$(KUBEBUILDER_ASSETS=$T/empty "$KCP" find 2>&1)
rc=$?
check "assets without kube-apiserver: exit 1" 1 "$rc"
case "$err" in *"KUBEBUILDER_ASSETS=$T/empty holds no executable kube-apiserver"*) echo "ok: says which folder lacks what" ;;
  *) echo "FAIL: unclear error: $err"; fails=$((fails + 1)) ;; esac
err=$(KUBETRAIN_TEST_KUBECONFIG=$T/nope "$KCP" find 2>&1)
check "an unreadable kubeconfig: exit 1" 1 "$?"

# An existing cluster: start prints its kubeconfig, starts and stops nothing.
out=$(KUBETRAIN_TEST_KUBECONFIG=$T/kubeconfig "$KCP" start "$T/state" 2>/dev/null)
check "existing cluster: start prints its kubeconfig" "$T/kubeconfig" "$out"
check "existing cluster: no processes started" "" "$(ls "$T/state/run" 2>/dev/null)"
"$KCP" stop "$T/state"
check "existing cluster: stop leaves its kubeconfig" "apiVersion: v1" "$(cat "$T/kubeconfig")"

# A real start from KUBEBUILDER_ASSETS holding the kube-control-plane tool's binaries.
if [ -n "${ASSETS_FROM_TOOL:-}" ] && [ -f "$ASSETS_FROM_TOOL/bin/kube-apiserver.xz" ] &&
  command -v etcd >/dev/null; then
  mkdir -p "$T/real-assets"
  xz -dc "$ASSETS_FROM_TOOL/bin/kube-apiserver.xz" >"$T/real-assets/kube-apiserver"
  chmod +x "$T/real-assets/kube-apiserver"
  ln -s "$(command -v etcd)" "$T/real-assets/etcd"  # no controller-manager: as envtest's assets
  started=$T/real-state
  kubeconfig=$(KUBEBUILDER_ASSETS=$T/real-assets "$KCP" start "$started" 2>"$T/start.err" | tail -1)
  check "assets: start prints the kubeconfig" "$started/kubeconfig" "$kubeconfig"
  pid=$(cat "$started/run/kube-apiserver.pid" 2>/dev/null)
  check "assets: the kube-apiserver that runs is the assets' one" "$T/real-assets/kube-apiserver" \
    "$(readlink "/proc/$pid/exe" 2>/dev/null)"
  grep -q "no kube-controller-manager in $T/real-assets" "$T/start.err" &&
    echo "ok: says it runs without a controller-manager" ||
    { echo "FAIL: no word on the missing controller-manager: $(cat "$T/start.err")"; fails=$((fails + 1)); }
  token=$(cat "$started/pki/admin.token")
  ready=$(curl -s --cacert "$started/pki/apiserver.crt" -H "Authorization: Bearer $token" \
    "https://127.0.0.1:$(cat "$started/api-port")/readyz")
  check "assets: the API server answers /readyz" ok "$ready"
  "$KCP" stop "$started"
  started=""
  check "assets: stop ends kube-apiserver" gone "$(kill -0 "$pid" 2>/dev/null && echo running || echo gone)"
else
  echo "skipped the real start: ASSETS_FROM_TOOL unset or without bin/kube-apiserver.xz, or no etcd"
fi
[ "$fails" = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "PASS"
