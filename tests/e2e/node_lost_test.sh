#!/bin/bash
# A node lost: a second node agent runs both workers (the first node is tainted, the PS pinned
# to it and tolerating the taint); the test stops that agent, as a node dies. Its Lease stops,
# the first agent marks it Ready=Unknown after NODE_MONITOR_GRACE s (as kube-controller-manager
# would), and nodeLostTimeoutSeconds later the operator force-deletes the workers' pods, which
# are recreated on the first node: a NodeLost disruption, not counted toward backoffLimit. The
# job succeeds above the accuracy bar. Reports how long the recreation took.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "a second node agent to stop"
NODE_A=kubetrain-node
NODE_B=e2e-node-b
NODE_LOST_TIMEOUT=3
# The grace period the cluster's agents were started with (cluster_up.sh).
NODE_MONITOR_GRACE=$(. "$E2E_STATE/run/node-env"; echo "${NODE_MONITOR_GRACE:-40}")
use_namespace e2e-node-lost
node_cleanup() {
  "$ROOT/scripts/local-cluster.sh" stop-node $NODE_B "$E2E_STATE" >/dev/null 2>&1 || true
  k taint node $NODE_A e2e- >/dev/null 2>&1 || true
  k delete node $NODE_B --wait=false >/dev/null 2>&1 || true
}
trap 'rc=$?; node_cleanup; (exit $rc); cleanup_namespaces' EXIT
"$ROOT/scripts/local-cluster.sh" add-node $NODE_B "$E2E_STATE"
k taint node $NODE_A e2e=node-lost:NoSchedule --overwrite >/dev/null
JOB=fmnist-ps-sync
# Long enough (about a minute here) to lose a node mid-run and finish after.
E2E_EPOCHS=30 job_json fmnist-ps-sync.yaml "
j['spec']['runPolicy']['nodeLostTimeoutSeconds'] = $NODE_LOST_TIMEOUT
ps = j['spec']['replicaSpecs']['PS']['template']['spec']
ps['nodeSelector'] = {'kubernetes.io/hostname': '$NODE_A'}
ps['tolerations'] = [{'key': 'e2e', 'operator': 'Exists', 'effect': 'NoSchedule'}]
" >"$E2E_STATE/$NS.json"
k apply -n "$NS" -f "$E2E_STATE/$NS.json"
node_of() { k get pod "$1" -n "$NS" -o jsonpath='{.spec.nodeName}' 2>/dev/null; }
workers_on() { [ "$(node_of $JOB-worker-0) $(node_of $JOB-worker-1)" = "$1 $1" ]; }
wait_until 60 "the workers on $NODE_B" workers_on $NODE_B
# Each agent binds the pods it takes on its own loop: ps-0 may be bound a moment later.
ps_placed() { [ -n "$(node_of $JOB-ps-0)" ]; }
wait_until 60 "ps-0 bound to a node" ps_placed
[ "$(node_of $JOB-ps-0)" = $NODE_A ] || fail "ps-0 is on '$(node_of $JOB-ps-0)', not $NODE_A"
wait_until 120 "worker-0 to train 50 steps" step_at_least $JOB-worker-0 50
uid0=$(k get pod $JOB-worker-0 -n "$NS" -o jsonpath='{.metadata.uid}')
uid1=$(k get pod $JOB-worker-1 -n "$NS" -o jsonpath='{.metadata.uid}')
log "stopping node $NODE_B (worker-0 at step $(current_step $JOB-worker-0))"
t0=$(now_ms)
"$ROOT/scripts/local-cluster.sh" stop-node $NODE_B "$E2E_STATE"
k taint node $NODE_A e2e- >/dev/null
node_ready() { k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }
unknown() { [ "$(node_ready $NODE_B)" = Unknown ]; }
wait_until 60 "$NODE_B Ready=Unknown" unknown
t_unknown=$(( $(now_ms) - t0 ))
replaced() {
  local u
  u=$(k get pod "$1" -n "$NS" -o jsonpath='{.metadata.uid}' 2>/dev/null)
  [ -n "$u" ] && [ "$u" != "$2" ]
}
both_replaced() { replaced $JOB-worker-0 "$uid0" && replaced $JOB-worker-1 "$uid1"; }
wait_until 60 "new worker pods" both_replaced
took=$(( $(now_ms) - t0 ))
log "$NODE_B Ready=Unknown after ${t_unknown} ms; both workers recreated ${took} ms after the node stopped (grace ${NODE_MONITOR_GRACE} s + nodeLostTimeoutSeconds $NODE_LOST_TIMEOUT)"
[ "$took" -le $(( (NODE_MONITOR_GRACE + NODE_LOST_TIMEOUT + 10) * 1000 )) ] ||
  fail "recreation took ${took} ms"
last=$(k get tj $JOB -n "$NS" -o jsonpath='{.status.lastFailure.reason} {.status.lastFailure.node}')
[ "$last" = "NodeLost $NODE_B" ] || fail "lastFailure '$last', want 'NodeLost $NODE_B'"
log "lastFailure: $(k get tj $JOB -n "$NS" -o jsonpath='{.status.lastFailure.message}')"
wait_until 60 "the workers on $NODE_A" workers_on $NODE_A
wait_job $JOB 300
counts=$(k get tj $JOB -n "$NS" -o jsonpath='{.status.restartCount} {.status.disruptionCount}')
read -r restarts disruptions <<<"$counts"
[ "${restarts:-0}" = 0 ] || fail "restartCount $restarts: the lost node counted toward backoffLimit"
[ "${disruptions:-0}" -ge 2 ] || fail "disruptionCount ${disruptions:-0}, want 2 (both workers)"
log "restartCount ${restarts:-0}, disruptionCount $disruptions"
assert_accuracy $JOB-worker-0
