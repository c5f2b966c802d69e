#!/bin/bash
# A real Kubernetes control plane for the realapi tests, the e2e tests and scripts/local-cluster.sh,
# found the way Kubernetes projects find one (controller-runtime's envtest), first match wins:
#
#   1. KUBETRAIN_TEST_KUBECONFIG     an existing cluster's kubeconfig (kind, k3d, minikube, a real
#                                    one): used as it is; nothing is started or stopped.
#   2. KUBEBUILDER_ASSETS            a folder holding kube-apiserver and etcd, as
#                                    `setup-envtest use -p path` prints it (etcd from PATH when the
#                                    folder has none); kube-controller-manager too when present
#                                    there (without it: no garbage collection, no service-account
#                                    tokens). Started on loopback, on free ports.
#   3. KUBETRAIN_KUBE_CONTROL_PLANE  a kube-control-plane tool folder (bin/kube-apiserver.xz and
#                                    bin/kube-controller-manager.xz, etcd from Debian's
#                                    etcd-server): unpacked into the state folder, started as in 2.
#   4. nothing: `find` prints "none" and why; callers use kubetrain-api-emulator or skip.
#
#   kube-control-plane.sh find             one line: "kubeconfig FILE" | "assets DIR" | "tool DIR"
#                                          | "none REASON"
#   kube-control-plane.sh start STATE_DIR  starts what `find` found (state, keys, logs and pid files
#                                          in STATE_DIR) and prints the kubeconfig path last
#   kube-control-plane.sh stop STATE_DIR   stops exactly what start started, removes etcd's data
#   kube-control-plane.sh free-port        a free loopback port below the ephemeral range (also
#                                          for local-cluster.sh's kubelet endpoints)
#
# Env for start: API_PORT, ETCD_PORT, ETCD_PEER, KCM_PORT (unset: free ports), NO_KCM=1 (no
# controller-manager even when there is one), KCM_EXTRA (extra controller-manager flags).
# Needs openssl and curl (scripts/setup.sh installs them with etcd-server and xz-utils).
set -euo pipefail

say() { echo "kube-control-plane.sh: $*" >&2; }

find_source() {
  if [ -n "${KUBETRAIN_TEST_KUBECONFIG:-}" ]; then
    [ -r "$KUBETRAIN_TEST_KUBECONFIG" ] ||
      { say "KUBETRAIN_TEST_KUBECONFIG=$KUBETRAIN_TEST_KUBECONFIG is not a readable file"; return 1; }
    echo "kubeconfig $(cd "$(dirname "$KUBETRAIN_TEST_KUBECONFIG")" && pwd)/$(basename "$KUBETRAIN_TEST_KUBECONFIG")"
  elif [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
    [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] ||
      { say "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS holds no executable kube-apiserver"; return 1; }
    [ -x "$KUBEBUILDER_ASSETS/etcd" ] || command -v etcd >/dev/null ||
      { say "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS holds no etcd and none is on PATH"; return 1; }
    echo "assets $(cd "$KUBEBUILDER_ASSETS" && pwd)"
  elif [ -n "${KUBETRAIN_KUBE_CONTROL_PLANE:-}" ] && [ -d "$KUBETRAIN_KUBE_CONTROL_PLANE" ]; then
    [ -f "$KUBETRAIN_KUBE_CONTROL_PLANE/bin/kube-apiserver.xz" ] ||
      [ -x "$KUBETRAIN_KUBE_CONTROL_PLANE/bin/kube-apiserver" ] ||
      { say "KUBETRAIN_KUBE_CONTROL_PLANE=$KUBETRAIN_KUBE_CONTROL_PLANE has no bin/kube-apiserver(.xz)"; return 1; }
    echo "tool $(cd "$KUBETRAIN_KUBE_CONTROL_PLANE" && pwd)"
  elif [ -n "${KUBETRAIN_KUBE_CONTROL_PLANE:-}" ]; then
    echo "none no control plane: KUBETRAIN_KUBE_CONTROL_PLANE=$KUBETRAIN_KUBE_CONTROL_PLANE does not exist, and neither KUBETRAIN_TEST_KUBECONFIG nor KUBEBUILDER_ASSETS is set"
  else
    echo "none no control plane: set KUBETRAIN_TEST_KUBECONFIG (an existing cluster), KUBEBUILDER_ASSETS (kube-apiserver and etcd binaries) or KUBETRAIN_KUBE_CONTROL_PLANE"
  fi
}

# Sets $port to a port nothing listens on, not handed out before by this script run. From
# 20000-25999: below Linux's ephemeral range (32768 up), where a client connection made between
# this choice and the server's bind could take it, and below the e2e clusters' fixed ports.
used_ports=" "
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 6000))
    case "$used_ports" in *" $p "*) continue ;; esac
    if ! ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; then
      used_ports="$used_ports$p "
      port=$p
      return 0
    fi
  done
  say "no free port"
  return 1
}

# Stops the process in pid file $1 if it still runs the binary named $2 (a reused pid is left alone).
stop_pid() {
  local f=$1 name=$2 pid exe
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  if [ -n "$exe" ] && [ "$(basename "$exe")" = "$name" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$f"
}

# Starts etcd, kube-apiserver and (when BIN has one) kube-controller-manager from BIN on loopback.
start_binaries() {
  local R=$1 BIN=$2
  local PKI=$R/pki RUN=$R/run LOG=$R/logs DATA=$R/etcd-data
  mkdir -p "$PKI" "$RUN" "$LOG"
  for n in etcd kube-apiserver kube-controller-manager; do
    if [ -f "$RUN/$n.pid" ] && kill -0 "$(cat "$RUN/$n.pid")" 2>/dev/null; then
      say "$n already runs from $R (pid $(cat "$RUN/$n.pid")); stop it first"
      return 1
    fi
  done
  local etcd_bin=$BIN/etcd
  [ -x "$etcd_bin" ] || etcd_bin=$(command -v etcd)
  local port api_port etcd_port etcd_peer kcm_port
  if [ -n "${API_PORT:-}" ]; then api_port=$API_PORT; else free_port; api_port=$port; fi
  if [ -n "${ETCD_PORT:-}" ]; then etcd_port=$ETCD_PORT; else free_port; etcd_port=$port; fi
  if [ -n "${ETCD_PEER:-}" ]; then etcd_peer=$ETCD_PEER; else free_port; etcd_peer=$port; fi
  if [ -n "${KCM_PORT:-}" ]; then kcm_port=$KCM_PORT; else free_port; kcm_port=$port; fi

  # A serving certificate for 127.0.0.1 and an admin token in system:masters, made once per state.
  [ -f "$PKI/sa.key" ] || {
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  }
  [ -f "$PKI/apiserver.crt" ] || openssl req -x509 -newkey rsa:2048 -nodes -days 3650 \
    -subj "/CN=kube-apiserver" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1" \
    -keyout "$PKI/apiserver.key" -out "$PKI/apiserver.crt" 2>/dev/null
  if [ ! -f "$PKI/token.csv" ]; then
    local t
    t=$(openssl rand -hex 24)
    echo "$t,admin,admin-uid,\"system:masters\"" >"$PKI/token.csv"
    echo "$t" >"$PKI/admin.token"
    chmod 600 "$PKI/token.csv" "$PKI/admin.token"
  fi
  local token
  token=$(cat "$PKI/admin.token")
  cat >"$R/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 <"$PKI/apiserver.crt")
users:
- name: admin
  user:
    token: $token
contexts:
- name: local
  context: {cluster: local, user: admin, namespace: default}
current-context: local
KC
  chmod 600 "$R/kubeconfig"

  rm -rf "$DATA"
  mkdir -p "$DATA"
  chmod 700 "$DATA"
  "$etcd_bin" --name local --data-dir "$DATA" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "local=http://127.0.0.1:$etcd_peer" --initial-cluster-state new \
    --quota-backend-bytes=2147483648 >"$LOG/etcd.log" 2>&1 &
  echo $! >"$RUN/etcd.pid"
  for _ in $(seq 1 50); do
    curl -fsS "http://127.0.0.1:$etcd_port/health" 2>/dev/null | grep -q '"health":"true"' && break
    sleep 0.2
  done
  curl -fsS "http://127.0.0.1:$etcd_port/health" >/dev/null 2>&1 ||
    { say "etcd did not come up; see $LOG/etcd.log"; return 1; }

  local kcm=1
  [ -x "$BIN/kube-controller-manager" ] && [ "${NO_KCM:-0}" != 1 ] || kcm=0
  local adm=()
  [ "$kcm" = 1 ] || adm=(--disable-admission-plugins=ServiceAccount)
  "$BIN/kube-apiserver" \
    --bind-address=127.0.0.1 --secure-port="$api_port" --insecure-port=0 \
    --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --token-auth-file="$PKI/token.csv" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --api-audiences=https://kubernetes.default.svc.cluster.local \
    --authorization-mode=RBAC --allow-privileged=true \
    --service-cluster-ip-range=10.96.0.0/16 --service-node-port-range=30000-32767 \
    --profiling=false "${adm[@]}" --v=1 >"$LOG/kube-apiserver.log" 2>&1 &
  echo $! >"$RUN/kube-apiserver.pid"
  ready() {
    [ "$(curl -s --cacert "$PKI/apiserver.crt" -H "Authorization: Bearer $token" \
      "https://127.0.0.1:$api_port/readyz" 2>/dev/null)" = ok ]
  }
  for _ in $(seq 1 120); do
    ready && break
    kill -0 "$(cat "$RUN/kube-apiserver.pid")" 2>/dev/null ||
      { say "kube-apiserver died; see $LOG/kube-apiserver.log"; return 1; }
    sleep 0.5
  done
  ready || { say "kube-apiserver not ready after 60 s; see $LOG/kube-apiserver.log"; return 1; }

  if [ "$kcm" = 1 ]; then
    # The node lifecycle controller is off: kubetrain-node-agent marks lost nodes itself.
    "$BIN/kube-controller-manager" \
      --kubeconfig="$R/kubeconfig" \
      --bind-address=127.0.0.1 --secure-port="$kcm_port" --port=0 \
      --leader-elect=false --use-service-account-credentials=false \
      --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/apiserver.crt" \
      --controllers='*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-route,-service,-attachdetach,-persistentvolume-binder,-persistentvolume-expander,-pvc-protection,-pv-protection,-ttl,-csrsigning,-csrapproving,-csrcleaner' \
      --profiling=false ${KCM_EXTRA:-} --v=1 >"$LOG/kube-controller-manager.log" 2>&1 &
    echo $! >"$RUN/kube-controller-manager.pid"
    # Ready once the service-account controller has made the default ServiceAccount.
    local ok=0
    for _ in $(seq 1 60); do
      if curl -sf --cacert "$PKI/apiserver.crt" -H "Authorization: Bearer $token" \
        "https://127.0.0.1:$api_port/api/v1/namespaces/default/serviceaccounts/default" \
        >/dev/null 2>&1; then
        ok=1
        break
      fi
      kill -0 "$(cat "$RUN/kube-controller-manager.pid")" 2>/dev/null ||
        { say "kube-controller-manager died; see $LOG/kube-controller-manager.log"; return 1; }
      sleep 0.5
    done
    [ "$ok" = 1 ] || { say "kube-controller-manager made no default ServiceAccount in 30 s"; return 1; }
  else
    say "no kube-controller-manager in $BIN: no garbage collection, no service-account tokens"
  fi
  echo "$api_port" >"$R/api-port"
}

cmd=${1:-}
case "$cmd" in
  find)
    find_source
    ;;
  free-port)
    free_port && echo "$port"
    ;;
  start)
    R=${2:?usage: kube-control-plane.sh start STATE_DIR}
    mkdir -p "$R"
    R=$(cd "$R" && pwd)
    src=$(find_source)
    kind=${src%% *} where=${src#* }
    case "$kind" in
      none)
        say "$where"
        exit 1
        ;;
      kubeconfig)
        echo "$src" >"$R/source"
        say "using the existing cluster of $where (nothing started)"
        echo "$where"
        ;;
      assets)
        echo "$src" >"$R/source"
        say "starting kube-apiserver and etcd from KUBEBUILDER_ASSETS=$where in $R"
        start_binaries "$R" "$where" || { "$0" stop "$R"; exit 1; }
        echo "$R/kubeconfig"
        ;;
      tool)
        echo "$src" >"$R/source"
        mkdir -p "$R/bin"
        for n in kube-apiserver kube-controller-manager; do
          [ -x "$R/bin/$n" ] && continue
          if [ -x "$where/bin/$n" ]; then
            ln -sf "$where/bin/$n" "$R/bin/$n"
          elif [ -f "$where/bin/$n.xz" ]; then
            xz -dc "$where/bin/$n.xz" >"$R/bin/$n.tmp" && chmod +x "$R/bin/$n.tmp" &&
              mv "$R/bin/$n.tmp" "$R/bin/$n"
          fi
        done
        say "starting the control plane of $where in $R"
        start_binaries "$R" "$R/bin" || { "$0" stop "$R"; exit 1; }
        echo "$R/kubeconfig"
        ;;
    esac
    ;;
  stop)
    R=${2:?usage: kube-control-plane.sh stop STATE_DIR}
    [ -d "$R" ] || exit 0
    stop_pid "$R/run/kube-controller-manager.pid" kube-controller-manager
    stop_pid "$R/run/kube-apiserver.pid" kube-apiserver
    stop_pid "$R/run/etcd.pid" etcd
    rm -rf "$R/etcd-data"
    rm -f "$R/source"
    ;;
  *)
    echo "usage: $0 find | start STATE_DIR | stop STATE_DIR | free-port" >&2
    exit 2
    ;;
esac
