#!/bin/bash
# CTest fixture (FIXTURES_SETUP e2e_cluster): starts the local cluster for the e2e tests,
# or records why it cannot so that every test skips with that reason. Its API server is a real
# control plane when scripts/kube-control-plane.sh finds one (KUBETRAIN_TEST_KUBECONFIG,
# KUBEBUILDER_ASSETS, KUBETRAIN_KUBE_CONTROL_PLANE), else kubetrain-api-emulator: the tests
# run either way, and the few that need the real kube-controller-manager skip on the emulator.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
E2E_STATE=${E2E_STATE:-/tmp/kubetrain-e2e}
export KUBETRAIN_KUBE_CONTROL_PLANE=${KUBETRAIN_KUBE_CONTROL_PLANE:-${E2E_DEFAULT_KUBE_CONTROL_PLANE:-}}
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
export BUILD_DIR
# Ports of this cluster's control plane, apart from the defaults other tests use.
export API_PORT=${E2E_API_PORT:-26443} ETCD_PORT=${E2E_ETCD_PORT:-32379}
export ETCD_PEER=${E2E_ETCD_PEER:-32380} KCM_PORT=${E2E_KCM_PORT:-30257}
export NODE_BRIDGE=${E2E_BRIDGE:-kte0} NODE_SUBNET=${E2E_SUBNET:-10.246.0}
# A lost node is noticed within seconds (node_lost_test.sh): Leases of 4 s renewed every
# second, and a node without a renewal for 6 s is marked Ready=Unknown.
export NODE_LEASE_SECONDS=${E2E_NODE_LEASE_SECONDS:-4} NODE_MONITOR_GRACE=${E2E_NODE_MONITOR_GRACE:-6}

"$ROOT/scripts/local-cluster.sh" down "$E2E_STATE" >/dev/null 2>&1
rm -rf "$E2E_STATE"
mkdir -p "$E2E_STATE"
skip_because() { echo "$*" >"$E2E_STATE/skip"; echo "e2e cluster not started: $*"; exit 0; }
kubectl_found() {
  if [ -x "$ROOT/.cache/tools/bin/kubectl" ]; then K=$ROOT/.cache/tools/bin/kubectl
  elif command -v kubectl >/dev/null; then K=$(command -v kubectl)
  else skip_because "no kubectl (scripts/setup.sh installs it)"; fi
  echo "$K" >"$E2E_STATE/kubectl"
}

# An existing cluster with nodes of its own (kind, k3d, a real one): KUBETRAIN_TEST_KUBECONFIG
# with KUBETRAIN_TEST_IMAGE. Pods run that image on the cluster's nodes and the operator must
# already run there (docs/install.md); nothing is started, no root needed. The tests that need
# the node agent's process model (its pids, network namespaces, nodes) skip, saying so.
if [ -n "${KUBETRAIN_TEST_KUBECONFIG:-}" ] && [ -n "${KUBETRAIN_TEST_IMAGE:-}" ]; then
  kubectl_found
  mkdir -p "$E2E_STATE/kcp"
  cp "$KUBETRAIN_TEST_KUBECONFIG" "$E2E_STATE/kcp/kubeconfig" ||
    { echo "e2e: cannot read KUBETRAIN_TEST_KUBECONFIG=$KUBETRAIN_TEST_KUBECONFIG"; exit 1; }
  KUBECONFIG=$E2E_STATE/kcp/kubeconfig "$K" get crd trainingjobs.kubetrain.io >/dev/null 2>&1 || {
    echo "e2e: the cluster of $KUBETRAIN_TEST_KUBECONFIG has no TrainingJob CRD: install kubetrain there first (docs/install.md)"
    exit 1
  }
  echo cluster >"$E2E_STATE/mode"
  echo "$KUBETRAIN_TEST_IMAGE" >"$E2E_STATE/image"
  echo "e2e: the existing cluster of $KUBETRAIN_TEST_KUBECONFIG, pods on image $KUBETRAIN_TEST_IMAGE (no node agent: the tests that need it skip)"
  exit 0
fi
[ "$(id -u)" = 0 ] || skip_because "not root: these tests need the node agent's network namespaces (veth cuts, per-pod addresses); e2e_loopback_test and e2e_emulator_cluster_test run without root"
found=$("$ROOT/scripts/kube-control-plane.sh" find) || skip_because "control plane: $found"
API=real
if [ "${found%% *}" = none ]; then
  API=emulator
  echo "e2e: ${found#none }: the e2e tests run on kubetrain-api-emulator"
  [ -x "$BUILD_DIR/tools/api_emulator/kubetrain-api-emulator" ] ||
    skip_because "no real control plane and no $BUILD_DIR/tools/api_emulator/kubetrain-api-emulator"
else
  echo "e2e: control plane: $found"
fi
kubectl_found
command -v ip >/dev/null || skip_because "no iproute2"
[ -d /usr/share/datasets/fashion-mnist ] || skip_because "no Fashion-MNIST (dataset-fashion-mnist)"
start=$SECONDS
"$ROOT/scripts/local-cluster.sh" up --api "$API" "$E2E_STATE" || {
  tail -20 "$E2E_STATE/logs/"*.log 2>/dev/null
  "$ROOT/scripts/local-cluster.sh" down "$E2E_STATE"
  exit 1
}
echo "$API" >"$E2E_STATE/api"
echo local >"$E2E_STATE/mode"
echo "e2e cluster up in $((SECONDS - start)) s ($API API server)"
