#!/bin/bash
# The node agent's loopback fallback, on its own local cluster (a second agent next to the
# fixture's would race it for the pods): the agent runs as an unprivileged user (setpriv, uid
# E2E_LOOPBACK_UID, 65534) with --network auto, so it may not create network namespaces. It must
# say once that it fell back, and examples/fmnist-ps-sync.yaml must still train to Succeeded:
# pods at 127.0.0.1, each replica listening on its own loopback port named in its rewritten
# TF_CONFIG, its processes running as that user, `kubectl get tj` progress moving (each pod's
# metrics port published in its prometheus.io/port annotation). Not root: the agent runs as
# this user with --network loopback.
set -uo pipefail
E2E_STATE=${E2E_LOOPBACK_STATE:-/tmp/kubetrain-e2e-loopback}
source "$(dirname "$0")/lib.sh"
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
# Its own control plane's ports, apart from the e2e fixture's.
export API_PORT=${E2E_LOOPBACK_API_PORT:-26453} ETCD_PORT=${E2E_LOOPBACK_ETCD_PORT:-32389}
export ETCD_PEER=${E2E_LOOPBACK_ETCD_PEER:-32390} KCM_PORT=${E2E_LOOPBACK_KCM_PORT:-30267}
UID_=${E2E_LOOPBACK_UID:-65534}

found=$("$ROOT/scripts/kube-control-plane.sh" find) || fail "control plane: $found"
case "$found" in
  none*) API=emulator ;;
  kubeconfig*) skip "KUBETRAIN_TEST_KUBECONFIG: this test starts its own control plane" ;;
  *) API=real ;;
esac
if [ -x "$ROOT/.cache/tools/bin/kubectl" ]; then K=$ROOT/.cache/tools/bin/kubectl
elif command -v kubectl >/dev/null; then K=$(command -v kubectl)
else skip "no kubectl (scripts/setup.sh installs it)"; fi
[ -d /usr/share/datasets/fashion-mnist ] || skip "no Fashion-MNIST (dataset-fashion-mnist)"
if [ "$(id -u)" = 0 ]; then
  command -v setpriv >/dev/null || skip "no setpriv (util-linux) to drop root"
  export NODE_AGENT_USER=$UID_ NODE_NETWORK=auto
else
  UID_=$(id -u)
  export NODE_NETWORK=loopback
fi

"$ROOT/scripts/local-cluster.sh" down "$E2E_STATE" >/dev/null 2>&1
rm -rf "$E2E_STATE"
mkdir -p "$E2E_STATE"
teardown() {
  local rc=$? left
  set +e
  "$ROOT/scripts/local-cluster.sh" down "$E2E_STATE" >/dev/null 2>&1
  # Nothing the agent started may outlive it.
  left=$(pgrep -u "$UID_" -f "$BUILD_DIR/runtime/kubetrain" | tr '\n' ' ') || true
  if [ -n "$left" ]; then echo "FAIL: processes left behind: $left"; rc=1; fi
  exit $rc
}
trap teardown EXIT
"$ROOT/scripts/local-cluster.sh" up --api "$API" "$E2E_STATE" >/dev/null ||
  fail "local-cluster.sh up failed: $(tail -5 "$E2E_STATE/logs/"*.log 2>/dev/null)"
export KUBECONFIG=$E2E_STATE/kcp/kubeconfig

notices=$(grep -c "falling back to loopback\|--network loopback:" "$E2E_STATE/logs/node-agent.log")
[ "$notices" = 1 ] || fail "the agent said $notices times that it fell back to loopback (want 1)"
log "agent: $(grep -o "no permission for network namespaces.*falling back to loopback\|--network loopback" "$E2E_STATE/logs/node-agent.log")"

NS=e2e-loopback
k create namespace "$NS" >/dev/null
JOB=fmnist-ps-sync
# One epoch more than the other e2e jobs: the checks below need the processes alive.
E2E_EPOCHS=${E2E_LOOPBACK_EPOCHS:-$E2E_MOVING_EPOCHS}
job_yaml fmnist-ps-sync.yaml >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml" >/dev/null
record_tj_rows $JOB "$E2E_STATE/$NS.rows" 240 &
recorder=$!

# While it runs: every pod at 127.0.0.1, each replica's processes as the agent's user, each
# told a distinct loopback port for each replica, the same one by every replica.
wait_until 120 "the three pods to run" bash -c \
  "[ \$(\"$K\" get pods -n $NS --field-selector=status.phase=Running -o name 2>/dev/null | wc -l) = 3 ]"
ips=$(k get pods -n "$NS" -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}' | sort -u)
[ "$ips" = 127.0.0.1 ] || fail "pod IPs are not all 127.0.0.1: $ips"
declare -A clusters
for r in ps-0 worker-0 worker-1; do
  pid=$(pod_field "$JOB-$r" "['pids']['kubetrain']")
  owner=$(stat -c %u "/proc/$pid")
  [ "$owner" = "$UID_" ] || fail "$JOB-$r runs as uid $owner, not $UID_"
  tf=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^TF_CONFIG=//p')
  clusters[$r]=$(python3 -c "import json,sys; print(json.dumps(json.loads(sys.argv[1])['cluster'], sort_keys=True))" "$tf")
  log "$JOB-$r (pid $pid, uid $owner): TF_CONFIG cluster ${clusters[$r]}"
done
[ "${clusters[ps-0]}" = "${clusters[worker-0]}" ] && [ "${clusters[ps-0]}" = "${clusters[worker-1]}" ] ||
  fail "replicas were told different clusters"
python3 - "${clusters[ps-0]}" <<'PY' || fail "the cluster is not three distinct 127.0.0.1 ports"
import json, sys
c = json.loads(sys.argv[1])
addrs = c["ps"] + c["worker"]
assert len(addrs) == 3 and all(a.startswith("127.0.0.1:") for a in addrs), addrs
assert len(set(addrs)) == 3, addrs
PY
metrics=$(k get pods -n "$NS" -o jsonpath='{range .items[*]}{.metadata.annotations.prometheus\.io/port}{"\n"}{end}' | sort -u | wc -l)
[ "$metrics" = 3 ] || fail "the pods' prometheus.io/port annotations are not 3 distinct ports"

wait "$recorder" || fail "$JOB did not finish in time"
wait_job $JOB 10
assert_rows_moved "$E2E_STATE/$NS.rows"
assert_accuracy $JOB-worker-0
