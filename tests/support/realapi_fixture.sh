#!/bin/bash
# The CTest fixture behind the `realapi` label: a real Kubernetes control plane
# (kube-apiserver, kube-controller-manager, etcd) from the kube-control-plane
# tool, started for one test run and stopped after it.
#
#   realapi_fixture.sh start WORK_DIR DEFAULT_TOOL_DIR SOURCE_DIR
#   realapi_fixture.sh run   WORK_DIR COMMAND [ARGS...]
#   realapi_fixture.sh stop  WORK_DIR
#
# start: the tool is $KUBETRAIN_KUBE_CONTROL_PLANE, else DEFAULT_TOOL_DIR. When
#   it is absent, start writes WORK_DIR/skip-reason and succeeds, and every
#   `run` skips (exit 77, CTest's SKIP_RETURN_CODE) saying why. Otherwise it
#   starts an instance in a fresh temporary state folder on free ports (not the
#   tool's defaults, so a developer's own instance is left alone), installs the
#   TrainingJob CRD (crds/) and Volcano's PodGroup CRD (tests/support/crds/) and
#   writes WORK_DIR/kubeconfig. A tool that is present but fails to start fails.
# run: COMMAND with KUBETRAIN_TEST_KUBECONFIG=WORK_DIR/kubeconfig.
# stop: stops exactly what start started and removes its state folder.
set -uo pipefail

cmd=${1:?usage: realapi_fixture.sh start|run|stop WORK_DIR ...}
work=${2:?WORK_DIR missing}
shift 2

log() { echo "realapi: $*"; }

stop_instance() {
  [ -f "$work/state-dir" ] || return 0
  local state tool
  state=$(cat "$work/state-dir")
  tool=$(cat "$work/tool-dir" 2>/dev/null || true)
  if [ -n "$tool" ] && [ -x "$tool/stop.sh" ] && [ -d "$state" ]; then
    "$tool/stop.sh" "$state" >/dev/null 2>&1 || true
    log "stopped the control plane in $state"
  fi
  case "$state" in
    */kt-realapi.*) rm -rf "$state" ;;
  esac
  rm -f "$work/state-dir" "$work/tool-dir" "$work/kubeconfig"
}

# A port nothing listens on and not handed out before in this run.
used_ports=" "
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 30000))
    case "$used_ports" in *" $p "*) continue ;; esac
    if ! ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; then
      used_ports="$used_ports$p "
      port=$p
      return 0
    fi
  done
  return 1
}

case "$cmd" in
  start)
    default_tool=${1:?DEFAULT_TOOL_DIR missing}
    src=${2:?SOURCE_DIR missing}
    mkdir -p "$work"
    stop_instance  # a run that was interrupted before its cleanup
    rm -f "$work/skip-reason"
    tool=${KUBETRAIN_KUBE_CONTROL_PLANE:-$default_tool}
    if [ ! -x "$tool/start.sh" ] || [ ! -x "$tool/stop.sh" ]; then
      echo "no real control plane: $tool/start.sh not found (set KUBETRAIN_KUBE_CONTROL_PLANE to the kube-control-plane tool)" >"$work/skip-reason"
      log "$(cat "$work/skip-reason"); the realapi tests will skip"
      exit 0
    fi
    tool=$(cd "$tool" && pwd)
    state=$(mktemp -d "${TMPDIR:-/tmp}/kt-realapi.XXXXXX")
    echo "$state" >"$work/state-dir"
    echo "$tool" >"$work/tool-dir"
    ports=()
    for _ in 1 2 3 4; do
      free_port || {
        log "no free ports"
        exit 1
      }
      ports+=("$port")
    done
    api=${ports[0]} etcd=${ports[1]} peer=${ports[2]} kcm=${ports[3]}
    log "starting $tool in $state (API port $api)"
    t0=$(date +%s.%N)
    # The controller-manager's client limits (20 qps) slow namespace deletion
    # and garbage collection when several suites run at once: lifted.
    if ! API_PORT=$api ETCD_PORT=$etcd ETCD_PEER=$peer KCM_PORT=$kcm \
      KCM_EXTRA="--kube-api-qps=1000 --kube-api-burst=1000" \
      "$tool/start.sh" "$state" >"$work/start.log" 2>&1; then
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
    url="https://127.0.0.1:$api"
    crd_api="$url/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    # kube-apiserver reads YAML bodies; v1.20 drops the CRD's
    # x-kubernetes-validations (CEL), as `kubectl apply --validate=false` would.
    for f in "$src/crds/kubetrain.io_trainingjobs.yaml" \
      "$src/tests/support/crds/scheduling.volcano.sh_podgroups.yaml"; do
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
