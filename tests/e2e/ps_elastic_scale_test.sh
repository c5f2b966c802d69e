#!/bin/bash
# A parameter-server job scaled 2 -> 3 workers mid-run (issue 29): elasticPolicy {minReplicas: 2,
# maxReplicas: 3} on examples/fmnist-ps-sync.yaml, `kubectl scale` to 3. The new worker-2 registers
# with the PS and trains (sync mode counts it from a round boundary); the PS and the first two
# workers keep their pods and restartCount 0; the job succeeds above the accuracy bar.
source "$(dirname "$0")/lib.sh"
require_cluster
use_namespace e2e-ps-elastic
JOB=fmnist-ps-sync
E2E_EPOCHS=30 job_json fmnist-ps-sync.yaml \
  'j["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 3}' \
  --log-every 20 --train-limit 12000 >"$E2E_STATE/$NS.json"
k apply -n "$NS" -f "$E2E_STATE/$NS.json"
uid() { k get pod "$JOB-$1" -n "$NS" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
restarts() { k get pod "$JOB-$1" -n "$NS" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
wait_until 180 "worker-0 to pass step 100" step_at_least $JOB-worker-0 100
declare -A before=()
for p in ps-0 worker-0 worker-1; do before[$p]=$(uid $p); done
k scale "tj/$JOB" -n "$NS" --replicas=3 >/dev/null
log "scaled to 3 workers at step $(current_step $JOB-worker-0)"
wait_until 120 "worker-2 to train" step_at_least $JOB-worker-2 20
log "worker-2 trains: $(pod_log $JOB-worker-2 | grep -m1 '^progress')"
joined() { pod_log $JOB-ps-0 | grep -q "worker-2 joined at step"; }
wait_until 30 "ps-0 to count worker-2" joined
log "ps-0: $(pod_log $JOB-ps-0 | grep -m1 'worker-2 joined at step')"
at=$(current_step $JOB-worker-0)
wait_until 120 "worker-0 to train 100 more steps" step_at_least $JOB-worker-0 $((at + 100))
# Checked while the job runs: cleanPodPolicy Running deletes what still runs when it succeeds.
for p in ps-0 worker-0 worker-1; do
  [ "$(uid $p)" = "${before[$p]}" ] || fail "$p was replaced"
  [ "$(restarts $p)" = 0 ] || fail "$p restarted"
done
log "the PS and workers 0-1 kept their pods, restartCount 0"
wait_job $JOB 400
[ "$(k get tj $JOB -n "$NS" -o jsonpath='{.status.restartCount}')" = 0 ] || fail "the job counted restarts"
events=$(k get events -n "$NS" -o jsonpath='{.items[*].message}')
if grep -q "code 129" <<<"$events"; then fail "a replica exited 129 (lost peer): $events"; fi
assert_accuracy $JOB-worker-0
