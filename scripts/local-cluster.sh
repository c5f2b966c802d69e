#!/bin/bash
# One command starts a local Kubernetes cluster for trying the operator without a cluster
# (docs/e2e.md): an API server (a real control plane found by scripts/kube-control-plane.sh:
# KUBETRAIN_TEST_KUBECONFIG, an existing cluster used as it is; KUBEBUILDER_ASSETS, kube-apiserver
# and etcd binaries started on loopback as envtest does; KUBETRAIN_KUBE_CONTROL_PLANE, the
# kube-control-plane tool; or, with none of them or with --api emulator, kubetrain-api-emulator,
# the tests' in-memory API emulator as a server), the TrainingJob CRD,
# the kubetrain-operator binary and
# kubetrain-node-agent playing the kubelet (pods run as process groups in network namespaces;
# without root, on the host's network with a loopback port per Service port), and the operator's
# admission webhook on a loopback port (a ValidatingWebhookConfiguration calling it by url).
#
#   scripts/local-cluster.sh up   [--api auto|real|emulator] [STATE_DIR]
#                                             # prints `export KUBECONFIG=...`
#   scripts/local-cluster.sh down [STATE_DIR]   # stops exactly what `up` started
#   scripts/local-cluster.sh logs POD [CONTAINER] [-n NAMESPACE] [STATE_DIR]
#                                             # a pod's whole log file, every run (`kubectl logs`
#                                             # works too: each agent serves the kubelet's log
#                                             # endpoint over HTTPS with a self-signed cert,
#                                             # STATE_DIR/pki/kubelet.crt)
#   scripts/local-cluster.sh start-operator [STATE_DIR]   # the operator again, after a kill
#   scripts/local-cluster.sh add-node NAME [STATE_DIR]    # a second node (its own agent)
#   scripts/local-cluster.sh stop-node NAME [STATE_DIR]   # that node lost: its agent and pods
#                                             # stop, its Lease stops; the first agent marks it
#                                             # Ready=Unknown after NODE_MONITOR_GRACE s
#
# STATE_DIR defaults to /tmp/kubetrain-local. Needs a build (`make build`); root gives each pod
# a network namespace, without it the agent falls back to loopback and says so. Env: the three
# above, API_PORT, ETCD_PORT, ETCD_PEER, KCM_PORT (a started control plane's ports; unset: free
# ones), BUILD_DIR (default build), NODE_CPU (8), NODE_MEMORY (16Gi), NODE_SUBNET
# (10.244.0), NODE_BRIDGE (kt0), NODE_NETWORK (auto|netns|loopback: the agent's --network),
# NODE_AGENT_USER (a uid: run the agent and so its pods as that user, with setpriv; as root this
# shows the loopback fallback), PROGRESS_INTERVAL (2s), NODE_LEASE_SECONDS (40: the agents'
# node Lease), NODE_MONITOR_GRACE (40: seconds without a Lease renewal before an agent marks
# another agent's Node Ready=Unknown, as kube-controller-manager's node lifecycle controller,
# which the control-plane tool runs without, would).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
shift || true

kubectl_bin() {
  if [ -x "$ROOT/.cache/tools/bin/kubectl" ]; then echo "$ROOT/.cache/tools/bin/kubectl"
  elif command -v kubectl >/dev/null; then command -v kubectl
  else echo "local-cluster.sh: no kubectl; run scripts/setup.sh" >&2; return 1; fi
}

stop_pid() {  # stop_pid FILE NAME: SIGTERM, then SIGKILL after 20 s
  local f=$1 name=$2 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "local-cluster.sh: $name did not stop in 20 s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$f"
}

kubelet_cert() {  # kubelet_cert STATE_DIR: a self-signed cert for the agents' kubelet endpoints, once
  local pki=$1/pki
  mkdir -p "$pki"
  if [ ! -s "$pki/kubelet.crt" ] || [ ! -s "$pki/kubelet.key" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kubetrain-node-agent" \
      -addext "subjectAltName=IP:127.0.0.1" \
      -keyout "$pki/kubelet.key.tmp" -out "$pki/kubelet.crt.tmp" 2>/dev/null
    mv "$pki/kubelet.key.tmp" "$pki/kubelet.key"
    mv "$pki/kubelet.crt.tmp" "$pki/kubelet.crt"
  fi
  chmod 600 "$pki/kubelet.key"
  [ -z "${NODE_AGENT_USER:-}" ] || chown "$NODE_AGENT_USER:$NODE_AGENT_USER" "$pki/kubelet.key"
}

free_port() { "$ROOT/scripts/kube-control-plane.sh" free-port; }  # an agent's kubelet endpoint

case "$cmd" in
up)
  API=${API:-auto}
  if [ "${1:-}" = --api ]; then API=${2:-}; shift 2; fi
  case "$API" in auto|real|emulator) ;; *) echo "local-cluster.sh: --api auto|real|emulator, not '$API'" >&2; exit 2 ;; esac
  S=${1:-/tmp/kubetrain-local}
  BUILD_DIR=${BUILD_DIR:-$ROOT/build}
  EMULATOR=$BUILD_DIR/tools/api_emulator/kubetrain-api-emulator
  found="none --api emulator"
  [ "$API" = emulator ] || found=$("$ROOT/scripts/kube-control-plane.sh" find) || exit 1
  if [ "$API" = auto ]; then
    if [ "${found%% *}" != none ]; then API=real; else
      API=emulator
      echo "local-cluster.sh: ${found#none }: using kubetrain-api-emulator" >&2
    fi
  fi
  OPERATOR=$BUILD_DIR/operator/kubetrain-operator
  AGENT=$BUILD_DIR/tools/node_agent/kubetrain-node-agent
  RUNTIME=$BUILD_DIR/runtime/kubetrain
  if [ "$(id -u)" != 0 ] || [ -n "${NODE_AGENT_USER:-}" ]; then
    echo "local-cluster.sh: the node agent runs without root: it will fall back to loopback (pods on 127.0.0.1, a port per Service port)" >&2
  fi
  for b in "$OPERATOR" "$AGENT" "$RUNTIME"; do
    [ -x "$b" ] || { echo "local-cluster.sh: $b missing; build it (cmake --build build --target kubetrain kubetrain-operator kubetrain-node-agent)" >&2; exit 1; }
  done
  if [ "$API" = real ]; then
    [ "${found%% *}" != none ] || { echo "local-cluster.sh: ${found#none } (or use --api emulator)" >&2; exit 1; }
  else
    [ -x "$EMULATOR" ] || { echo "local-cluster.sh: $EMULATOR missing; build it (cmake --build build --target kubetrain-api-emulator)" >&2; exit 1; }
  fi
  K=$(kubectl_bin)
  mkdir -p "$S/run" "$S/logs"
  for n in api-emulator operator node-agent; do
    if [ -f "$S/run/$n.pid" ] && kill -0 "$(cat "$S/run/$n.pid")" 2>/dev/null; then
      echo "local-cluster.sh: $n already running; run $0 down $S first" >&2; exit 1
    fi
  done
  echo "$API" >"$S/run/api"
  if [ "$API" = real ]; then
    echo "local-cluster.sh: control plane: $found" >&2
    KUBECONFIG_PATH=$("$ROOT/scripts/kube-control-plane.sh" start "$S/kcp" | tail -1)
    export KUBECONFIG=$KUBECONFIG_PATH
    echo "local-cluster.sh: applying the CRD" >&2
    "$K" apply --validate=false -f "$ROOT/crds/kubetrain.io_trainingjobs.yaml" >/dev/null
    "$K" wait --for=condition=Established --timeout=60s crd/trainingjobs.kubetrain.io >/dev/null
  else
    # The emulator serves the TrainingJob resource from the CRD manifest itself.
    echo "local-cluster.sh: starting kubetrain-api-emulator (logs: $S/logs/api-emulator.log)" >&2
    mkdir -p "$S/kcp"
    rm -f "$S/kcp/kubeconfig"
    "$EMULATOR" --kubeconfig-out "$S/kcp/kubeconfig" >"$S/logs/api-emulator.log" 2>&1 &
    echo $! >"$S/run/api-emulator.pid"
    for _ in $(seq 1 100); do [ -f "$S/kcp/kubeconfig" ] && break; sleep 0.1; done
    [ -f "$S/kcp/kubeconfig" ] || { cat "$S/logs/api-emulator.log" >&2; exit 1; }
    export KUBECONFIG=$S/kcp/kubeconfig
  fi
  echo "local-cluster.sh: starting kubetrain-node-agent (logs: $S/logs/node-agent.log)" >&2
  AS_USER=() AGENT_KUBECONFIG=$KUBECONFIG
  mkdir -p "$S/node"
  if [ -n "${NODE_AGENT_USER:-}" ]; then
    # Its own copy of the kubeconfig (the control plane's is root's, mode 600) and state.
    AGENT_KUBECONFIG=$S/node/kubeconfig
    cp "$KUBECONFIG" "$AGENT_KUBECONFIG"
    chown -R "$NODE_AGENT_USER:$NODE_AGENT_USER" "$S/node"
    AS_USER=(setpriv "--reuid=$NODE_AGENT_USER" "--regid=$NODE_AGENT_USER" --clear-groups --)
  fi
  # What add-node needs to start agents like this one.
  {
    printf 'AGENT_KUBECONFIG=%q\n' "$AGENT_KUBECONFIG"
    printf 'NODE_AGENT_USER=%q\n' "${NODE_AGENT_USER:-}"
    for v in NODE_NETWORK NODE_SUBNET NODE_BRIDGE NODE_CPU NODE_MEMORY NODE_LEASE_SECONDS NODE_MONITOR_GRACE; do
      printf '%s=%q\n' "$v" "${!v:-}"
    done
  } >"$S/run/node-env"
  # kube-apiserver (and the emulator) reach each agent's kubelet endpoint (pods/log) over
  # HTTPS at the Node's address and its own port; the certificate is not verified.
  kubelet_cert "$S"
  # Pods get .2-.127 of the /24; a node added later takes .128-.254 on the same bridge.
  "${AS_USER[@]}" "$AGENT" --kubeconfig "$AGENT_KUBECONFIG" --entrypoint "$RUNTIME" \
    --kubelet-port "$(free_port)" --tls-cert-file "$S/pki/kubelet.crt" \
    --tls-private-key-file "$S/pki/kubelet.key" \
    --state-dir "$S/node" --network "${NODE_NETWORK:-auto}" \
    --cpu "${NODE_CPU:-8}" --memory "${NODE_MEMORY:-16Gi}" --subnet "${NODE_SUBNET:-10.244.0}" \
    --bridge "${NODE_BRIDGE:-kt0}" --pod-addresses 2-127 \
    --node-lease-duration "${NODE_LEASE_SECONDS:-40}" \
    --node-monitor-grace-period "${NODE_MONITOR_GRACE:-40}" >"$S/logs/node-agent.log" 2>&1 &
  echo $! >"$S/run/node-agent.pid"
  # The bridge is this cluster's to remove only when the agent made one (netns).
  if [ "$(id -u)" = 0 ] && [ -z "${NODE_AGENT_USER:-}" ] && [ "${NODE_NETWORK:-auto}" != loopback ]; then
    echo "${NODE_BRIDGE:-kt0}" >"$S/run/bridge"
  fi
  # The operator's admission webhook (a scale outside spec.elasticPolicy is
  # refused by the API server): on a loopback port the API server calls by url;
  # the operator makes the certificate and sets the caBundle itself.
  WEBHOOK_PORT=$(free_port)
  echo "$WEBHOOK_PORT" >"$S/run/webhook-port"
  "$K" apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: kubetrain-validating-webhook
  labels: {app.kubernetes.io/name: kubetrain}
webhooks:
  - name: validate.trainingjobs.kubetrain.io
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 10
    clientConfig:
      url: https://127.0.0.1:$WEBHOOK_PORT/validate-kubetrain-io-v1alpha1-trainingjob
    rules:
      - apiGroups: [kubetrain.io]
        apiVersions: [v1alpha1]
        operations: [UPDATE]
        resources: [trainingjobs, trainingjobs/scale]
        scope: Namespaced
EOF
  "$0" start-operator "$S"
  for _ in $(seq 1 100); do
    [ -n "$("$K" get node -o name 2>/dev/null)" ] && break
    kill -0 "$(cat "$S/run/node-agent.pid")" 2>/dev/null || { tail -5 "$S/logs/node-agent.log" >&2; exit 1; }
    sleep 0.2
  done
  "$K" wait --for=condition=Ready --timeout=30s node --all >/dev/null
  echo "local-cluster.sh: ready. Pod logs: $0 logs POD [-n NS] $S" >&2
  echo "export KUBECONFIG=$KUBECONFIG"
  ;;
start-operator)  # (used by `up`, and by tests that restart the operator mid-job)
  S=${1:-/tmp/kubetrain-local}
  BUILD_DIR=${BUILD_DIR:-$ROOT/build}
  if [ -f "$S/run/operator.pid" ] && kill -0 "$(cat "$S/run/operator.pid")" 2>/dev/null; then
    echo "local-cluster.sh: the operator is running already" >&2; exit 1
  fi
  echo "local-cluster.sh: starting kubetrain-operator (logs: $S/logs/operator.log)" >&2
  WEBHOOK=(--webhook-bind-address 0)
  if [ -s "$S/run/webhook-port" ]; then
    WEBHOOK=(--webhook-bind-address "127.0.0.1:$(cat "$S/run/webhook-port")" --webhook-host 127.0.0.1)
  fi
  "$BUILD_DIR/operator/kubetrain-operator" --kubeconfig "$S/kcp/kubeconfig" --leader-elect=false \
    --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 "${WEBHOOK[@]}" \
    --progress-interval "${PROGRESS_INTERVAL:-2s}" >>"$S/logs/operator.log" 2>&1 &
  echo $! >"$S/run/operator.pid"
  ;;
add-node)  # NAME [STATE_DIR]: one more node, its own agent sharing the first one's bridge
  name=${1:-}; S=${2:-/tmp/kubetrain-local}
  [ -n "$name" ] || { echo "usage: $0 add-node NAME [STATE_DIR]" >&2; exit 2; }
  [ -f "$S/run/node-env" ] || { echo "local-cluster.sh: no cluster in $S (run up first)" >&2; exit 1; }
  [ -f "$S/run/node-agent-$name.pid" ] && kill -0 "$(cat "$S/run/node-agent-$name.pid")" 2>/dev/null && {
    echo "local-cluster.sh: node $name is running already" >&2; exit 1; }
  ls "$S"/run/node-agent-*.pid >/dev/null 2>&1 && ! [ -f "$S/run/node-agent-$name.pid" ] && {
    echo "local-cluster.sh: one added node at most (the pods' /24 has room for two agents)" >&2; exit 1; }
  # shellcheck disable=SC1091
  source "$S/run/node-env"
  BUILD_DIR=${BUILD_DIR:-$ROOT/build}
  K=$(kubectl_bin)
  export KUBECONFIG=$S/kcp/kubeconfig
  AS_USER=()
  if [ -n "${NODE_AGENT_USER:-}" ]; then
    AS_USER=(setpriv "--reuid=$NODE_AGENT_USER" "--regid=$NODE_AGENT_USER" --clear-groups --)
  fi
  mkdir -p "$S/nodes/$name"
  kubelet_cert "$S"
  [ -z "${NODE_AGENT_USER:-}" ] || chown -R "$NODE_AGENT_USER:$NODE_AGENT_USER" "$S/nodes/$name"
  echo "local-cluster.sh: starting node $name (logs: $S/logs/node-agent-$name.log)" >&2
  "${AS_USER[@]}" "$BUILD_DIR/tools/node_agent/kubetrain-node-agent" --kubeconfig "$AGENT_KUBECONFIG" \
    --entrypoint "$BUILD_DIR/runtime/kubetrain" --node-name "$name" \
    --kubelet-port "$(free_port)" --tls-cert-file "$S/pki/kubelet.crt" \
    --tls-private-key-file "$S/pki/kubelet.key" \
    --state-dir "$S/nodes/$name" --network "${NODE_NETWORK:-auto}" \
    --cpu "${NODE_CPU:-8}" --memory "${NODE_MEMORY:-16Gi}" --subnet "${NODE_SUBNET:-10.244.0}" \
    --bridge "${NODE_BRIDGE:-kt0}" --netns-prefix ktb --pod-addresses 128-254 \
    --node-lease-duration "${NODE_LEASE_SECONDS:-40}" \
    --node-monitor-grace-period "${NODE_MONITOR_GRACE:-40}" >>"$S/logs/node-agent-$name.log" 2>&1 &
  echo $! >"$S/run/node-agent-$name.pid"
  for _ in $(seq 1 100); do
    "$K" get node "$name" >/dev/null 2>&1 && break
    kill -0 "$(cat "$S/run/node-agent-$name.pid")" 2>/dev/null || { tail -5 "$S/logs/node-agent-$name.log" >&2; exit 1; }
    sleep 0.2
  done
  "$K" wait --for=condition=Ready --timeout=30s "node/$name" >/dev/null
  ;;
stop-node)  # NAME [STATE_DIR]: the node is lost: its agent stops its pods and exits without a word to the API
  name=${1:-}; S=${2:-/tmp/kubetrain-local}
  [ -n "$name" ] || { echo "usage: $0 stop-node NAME [STATE_DIR]" >&2; exit 2; }
  [ -f "$S/run/node-agent-$name.pid" ] || { echo "local-cluster.sh: no added node $name in $S" >&2; exit 1; }
  stop_pid "$S/run/node-agent-$name.pid" "kubetrain-node-agent ($name)"
  ;;
down)
  S=${1:-/tmp/kubetrain-local}
  stop_pid "$S/run/operator.pid" kubetrain-operator
  for f in "$S"/run/node-agent-*.pid; do
    [ -f "$f" ] && stop_pid "$f" "kubetrain-node-agent ($(basename "$f" .pid))"
  done
  stop_pid "$S/run/node-agent.pid" kubetrain-node-agent
  stop_pid "$S/run/api-emulator.pid" kubetrain-api-emulator
  # The agent removed its pods' namespaces; the bridge goes with the cluster.
  if [ -f "$S/run/bridge" ]; then ip link del "$(cat "$S/run/bridge")" 2>/dev/null || true; rm -f "$S/run/bridge"; fi
  if [ "$(cat "$S/run/api" 2>/dev/null)" != emulator ] && [ -d "$S/kcp" ]; then
    "$ROOT/scripts/kube-control-plane.sh" stop "$S/kcp" >/dev/null 2>&1 || true
  fi
  rm -f "$S/run/api" "$S/run/webhook-port"
  echo "local-cluster.sh: stopped" >&2
  ;;
logs)
  ns=default; pod=""; container=""; S=/tmp/kubetrain-local
  while [ $# -gt 0 ]; do
    case "$1" in
      -n) ns=$2; shift 2 ;;
      /*) S=$1; shift ;;
      *) if [ -z "$pod" ]; then pod=$1; else container=$1; fi; shift ;;
    esac
  done
  [ -n "$pod" ] || { echo "usage: $0 logs POD [CONTAINER] [-n NAMESPACE] [STATE_DIR]" >&2; exit 2; }
  d=$S/node/logs/$ns/$pod
  # A pod on an added node keeps its logs in that node's state.
  if [ ! -d "$d" ]; then for n in "$S"/nodes/*/logs/$ns/$pod; do [ -d "$n" ] && d=$n; done; fi
  [ -d "$d" ] || { echo "local-cluster.sh: no logs for $ns/$pod in $S" >&2; exit 1; }
  if [ -z "$container" ]; then container=$(cd "$d" && ls -- *.log | sed -n 1p); container=${container%.log}; fi
  cat "$d/$container.log"
  ;;
*)
  echo "usage: $0 up [--api auto|real|emulator] [STATE_DIR] | down [STATE_DIR] | logs POD [CONTAINER] [-n NAMESPACE] [STATE_DIR] | add-node NAME [STATE_DIR] | stop-node NAME [STATE_DIR] | start-operator [STATE_DIR]" >&2; exit 2 ;;
esac
