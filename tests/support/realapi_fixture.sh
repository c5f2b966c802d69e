#!/bin/bash
# The CTest fixture behind the `realapi` label: a real Kubernetes control plane
# found by scripts/kube-control-plane.sh (KUBETRAIN_TEST_KUBECONFIG, an existing
# cluster used as it is; else KUBEBUILDER_ASSETS, kube-apiserver and etcd started
# on loopback as envtest does; else the kube-control-plane tool,
# KUBETRAIN_KUBE_CONTROL_PLANE or DEFAULT_TOOL_DIR), for one test run.
#
#   realapi_fixture.sh start WORK_DIR DEFAULT_TOOL_DIR SOURCE_DIR
#   realapi_fixture.sh run   WORK_DIR COMMAND [ARGS...]
#   realapi_fixture.sh stop  WORK_DIR
#
# start: when nothing is found, start writes WORK_DIR/skip-reason and succeeds,
#   and every `run` skips (exit 77, CTest's SKIP_RETURN_CODE) saying why (each
#   test's own unit run already used the in-process API emulator). A started
#   control plane gets a fresh temporary state folder and free ports (a
#   developer's own instance is left alone); the TrainingJob CRD (crds/) and
#   Volcano's PodGroup CRD (tests/support/crds/) are installed either way, and
#   WORK_DIR/kubeconfig and WORK_DIR/source ("kubeconfig|assets|tool PATH")
#   written. A control plane that is found but fails to start fails.
# run: COMMAND with KUBETRAIN_TEST_KUBECONFIG=WORK_DIR/kubeconfig.
# stop: stops exactly what start started (nothing for an existing cluster).
set -uo pipefail

cmd=${1:?usage: realapi_fixture.sh start|run|stop WORK_DIR ...}
work=${2:?WORK_DIR missing}
shift 2

log() { echo "realapi: $*"; }

kcp() { "$(dirname "$0")/../../scripts/kube-control-plane.sh" "$@"; }

stop_instance() {
  [ -f "$work/state-dir" ] || return 0
  local state
  state=$(cat "$work/state-dir")
  if [ -d "$state" ]; then
    kcp stop "$state" >/dev/null 2>&1 || true
    log "stopped the control plane in $state"
  fi
  case "$state" in
    */kt-realapi.*) rm -rf "$state" ;;
  esac
  rm -f "$work/state-dir" "$work/kubeconfig" "$work/source"
}

kubectl_bin() {
  local root
  root=$(cd "$(dirname "$0")/../.." && pwd)
  if [ -x "$root/.cache/tools/bin/kubectl" ]; then echo "$root/.cache/tools/bin/kubectl"
  else command -v kubectl; fi
}

case "$cmd" in
  start)
    default_tool=${1-}  # may be empty
    src=${2:?SOURCE_DIR missing}
    mkdir -p "$work"
    stop_instance  # a run that was interrupted before its cleanup
    rm -f "$work/skip-reason"
    [ -n "${KUBETRAIN_KUBE_CONTROL_PLANE:-}" ] || export KUBETRAIN_KUBE_CONTROL_PLANE=$default_tool
    found=$(kcp find) || exit 1
    if [ "${found%% *}" = none ]; then
      echo "${found#none }" >"$work/skip-reason"
      log "$(cat "$work/skip-reason"); the realapi tests will skip (their unit runs used the API emulator)"
      exit 0
    fi
    crds=("$src/crds/kubetrain.io_trainingjobs.yaml"
      "$src/tests/support/crds/scheduling.volcano.sh_podgroups.yaml")
    if [ "${found%% *}" = kubeconfig ]; then
      # An existing cluster: used as it is, the CRDs applied as a user would.
      kubeconfig=${found#kubeconfig }
      log "using the existing cluster of $kubeconfig"
      K=$(kubectl_bin) || { log "no kubectl to install the CRDs with (scripts/setup.sh)"; exit 1; }
      KUBECONFIG=$kubeconfig "$K" apply --validate=false -f "${crds[0]}" -f "${crds[1]}" \
        >"$work/crd.out" 2>&1 || { log "installing the CRDs failed:"; cat "$work/crd.out"; exit 1; }
      KUBECONFIG=$kubeconfig "$K" wait --for=condition=Established --timeout=30s \
        crd/trainingjobs.kubetrain.io crd/podgroups.scheduling.volcano.sh >/dev/null ||
        { log "the CRDs are not Established after 30 s"; exit 1; }
      cp "$kubeconfig" "$work/kubeconfig"
      echo "$found" >"$work/source"
      exit 0
    fi
    state=$(mktemp -d "${TMPDIR:-/tmp}/kt-realapi.XXXXXX")
    echo "$state" >"$work/state-dir"
    log "starting the control plane of ${found} in $state"
    t0=$(date +%s.%N)
    # The controller-manager's client limits (20 qps) slow namespace deletion
    # and garbage collection when several suites run at once: lifted.
    if ! KCM_EXTRA="--kube-api-qps=1000 --kube-api-burst=1000" \
      kcp start "$state" >"$work/start.log" 2>&1; then
      log "the control plane did not start:"
      cat "$work/start.log"
      for f in "$state"/logs/*.log; do
        [ -f "$f" ] && { echo "--- $f (last lines)"; tail -n 20 "$f"; }
      done
      stop_instance
      exit 1
    fi
    token=$(cat "$state/pki/admin.token")
    ca="$state/pki/apiserver.crt"
    url="https://127.0.0.1:$(cat "$state/api-port")"
    crd_api="$url/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    # kube-apiserver reads YAML bodies; v1.20 drops the CRD's
    # x-kubernetes-validations (CEL), as `kubectl apply --validate=false` would.
    for f in "${crds[@]}"; do
      code=$(curl -s -o "$work/crd.out" -w '%{http_code}' --cacert "$ca" \
        -H "Authorization: Bearer $token" -H "Content-Type: application/yaml" \
        --data-binary "@$f" "$crd_api")
      if [ "$code" != 201 ]; then
        log "installing $f answered $code:"
        cat "$work/crd.out"
        stop_instance
        exit 1
      fi
    done
    for name in trainingjobs.kubetrain.io podgroups.scheduling.volcano.sh; do
      ok=0
      for _ in $(seq 1 100); do
        if curl -s --cacert "$ca" -H "Authorization: Bearer $token" "$crd_api/$name" |
          tr -d ' \n' | grep -q '"type":"Established","status":"True"'; then
          ok=1
          break
        fi
        sleep 0.1
      done
      [ "$ok" = 1 ] || {
        log "CRD $name not Established after 10 s"
        stop_instance
        exit 1
      }
    done
    cp "$state/kubeconfig" "$work/kubeconfig"
    echo "$found" >"$work/source"
    log "ready in $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $t0 }") s: $work/kubeconfig"
    ;;
  run)
    if [ ! -f "$work/kubeconfig" ]; then
      reason=$(cat "$work/skip-reason" 2>/dev/null || echo "the realapi fixture did not run")
      echo "realapi test skipped: $reason"
      exit 77
    fi
    export KUBETRAIN_TEST_KUBECONFIG="$work/kubeconfig"
    exec "$@"
    ;;
  stop)
    stop_instance
    rm -f "$work/skip-reason"
    ;;
  *)
    echo "usage: realapi_fixture.sh start|run|stop WORK_DIR ..." >&2
    exit 2
    ;;
esac
