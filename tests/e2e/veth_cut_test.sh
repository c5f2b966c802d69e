#!/bin/bash
# Cut worker-1's veth (its host end down) for longer than the peer timeout (5 s here), then
# restore it: the job restarts the lost replica per its policy (ExitCode: 129, lost peer,
# is retryable) and succeeds, or fails with a message naming the lost peer.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "a pod's veth link on the host"
use_namespace e2e-veth-cut
JOB=fmnist-ps-sync
PEER_TIMEOUT=5
job_yaml fmnist-ps-sync.yaml --peer-timeout $PEER_TIMEOUT >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
wait_until 120 "worker-1 to train 100 steps" step_at_least $JOB-worker-1 100
link=$(pod_field $JOB-worker-1 "['hostLink']")
uid=$(k get pod $JOB-worker-1 -n "$NS" -o jsonpath='{.metadata.uid}')
log "cutting worker-1's link $link at step $(current_step $JOB-worker-1) for $((PEER_TIMEOUT + 5)) s"
ip link set "$link" down
# The outage itself: it must outlast the peer timeout.
sleep $((PEER_TIMEOUT + 5))
# The pod may be gone already (its namespace and link with it).
ip link set "$link" up 2>/dev/null && log "link restored" || log "link gone with its pod"
deadline=$((SECONDS + 240))
until condition_true $JOB Succeeded || condition_true $JOB Failed; do
  [ $SECONDS -lt $deadline ] || fail "$JOB did not finish within 240 s after the cut"
  sleep 1
done
k get pods -n "$NS" -o custom-columns=NAME:.metadata.name,PHASE:.status.phase,RESTARTS:.status.containerStatuses[0].restartCount --no-headers
if condition_true $JOB Failed; then
  msg=$(k get tj $JOB -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Failed")].message}')
  log "$JOB failed: $msg"
  echo "$msg" | grep -Eqi "lost|peer|worker-1|ps-0" || fail "the failure does not name the lost peer: $msg"
else
  log "$JOB Succeeded after the cut"
  new_uid=$(k get pod $JOB-worker-1 -n "$NS" -o jsonpath='{.metadata.uid}' 2>/dev/null || true)
  grep -h "lost" "$E2E_STATE"/node/logs/"$NS"/*/kubetrain.log | head -3 || true
  assert_accuracy $JOB-worker-0
fi
