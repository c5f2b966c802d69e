#!/bin/bash
# Issue 15's operator figures on a real API server, in one command: for each
# client rate limit in RATES, a fresh control plane
# (scripts/kube-control-plane.sh: KUBEBUILDER_ASSETS with a kube-controller-manager, or
# KUBETRAIN_KUBE_CONTROL_PLANE, the kube-control-plane tool) whose kube-controller-manager runs
# with that limit, then `kubetrain_operator_bench --real-cluster` with our
# controller at the same limit: in process (time to all pods, requests per
# job, reconcile p50/p99, the action runner's times), the Job controller,
# and the kubetrain-operator binary (its time and peak RSS), each in its own
# namespace, and the ratio to the Job controller. docs/benchmarks.md
# ("Operator on a real API server") records what it printed.
#
#   scripts/operator-bench-real.sh [BUILD_DIR]       # default build/
#
# Env: RATES ("20 1000": 20 is client-go's and the Job controller's default
#      20 QPS / burst 30; any other N runs with QPS and burst N),
#      JOBS (500), WORKERS (16), ACTION_THREADS (16; "0,16" adds a run
#      whose workers send the requests themselves), SERVICE_MODE
#      (PerReplica), EXTRA (more bench flags: --binary-first runs the binary
#      before the others, --no-in-process), STATE_DIR (/tmp/kubetrain-operator-bench; wiped),
#      API_PORT/ETCD_PORT/ETCD_PEER/KCM_PORT (free ports when unset).
# About 4 minutes per rate above 100 QPS, 15 at 20 QPS, on 2 cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
KCP=$ROOT/scripts/kube-control-plane.sh
STATE=${STATE_DIR:-/tmp/kubetrain-operator-bench}
RATES=${RATES:-20 1000}
JOBS=${JOBS:-500}
WORKERS=${WORKERS:-16}
ACTION_THREADS=${ACTION_THREADS:-16}
SERVICE_MODE=${SERVICE_MODE:-PerReplica}
EXTRA=${EXTRA:-}  # more bench flags, e.g. --binary-first
BENCH=$BUILD/bench/kubetrain_operator_bench
OPERATOR=$BUILD/operator/kubetrain-operator

for f in "$BENCH" "$OPERATOR"; do
  [ -x "$f" ] || { echo "missing $f: cmake --build $BUILD --target kubetrain_operator_bench kubetrain-operator" >&2; exit 2; }
done
found=$("$KCP" find) || exit 2
case "$found" in
  assets* | tool*) ;;
  *) echo "this benchmark starts its own control plane: set KUBEBUILDER_ASSETS or KUBETRAIN_KUBE_CONTROL_PLANE ($found)" >&2; exit 2 ;;
esac
[ -n "${KUBEBUILDER_ASSETS:-}" ] && [ ! -x "$KUBEBUILDER_ASSETS/kube-controller-manager" ] &&
  { echo "KUBEBUILDER_ASSETS has no kube-controller-manager: the Job controller is the baseline" >&2; exit 2; }

stop_plane() { "$KCP" stop "$STATE" >/dev/null 2>&1 || true; }
trap stop_plane EXIT

install_crd() {
  local token ca url code
  token=$(cat "$STATE/pki/admin.token")
  ca="$STATE/pki/apiserver.crt"
  url=$(sed -n 's/^ *server: //p' "$STATE/kubeconfig")
  code=$(curl -s -o "$STATE/crd.out" -w '%{http_code}' --cacert "$ca" \
    -H "Authorization: Bearer $token" -H "Content-Type: application/yaml" \
    --data-binary "@$ROOT/crds/kubetrain.io_trainingjobs.yaml" \
    "$url/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
  [ "$code" = 201 ] || { echo "installing the CRD answered $code" >&2; cat "$STATE/crd.out" >&2; return 1; }
  for _ in $(seq 1 100); do
    if curl -s --cacert "$ca" -H "Authorization: Bearer $token" \
      "$url/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trainingjobs.kubetrain.io" |
      tr -d ' \n' | grep '"type":"Established","status":"True"' >/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "the TrainingJob CRD was not established" >&2
  return 1
}

rc=0
for rate in $RATES; do
  if [ "$rate" = 20 ]; then burst=30; else burst=$rate; fi
  limit="--kube-api-qps=$rate --kube-api-burst=$burst"
  echo "=== client rate limit $limit on both sides ($(date -u +%H:%M:%S) UTC, load: $(cut -d' ' -f1-3 /proc/loadavg))"
  stop_plane
  KCM_EXTRA="$limit" "$KCP" start "$STATE" >/dev/null
  install_crd
  KUBETRAIN_TEST_KUBECONFIG="$STATE/kubeconfig" "$BENCH" --real-cluster --jobs="$JOBS" \
    --workers="$WORKERS" --action-threads="$ACTION_THREADS" --kube-api-qps="$rate" $EXTRA \
    --kube-api-burst="$burst" --service-mode="$SERVICE_MODE" --kcm-rate-limit="$limit" \
    --keep-namespaces --operator-binary="$OPERATOR" || rc=1
done
exit $rc
