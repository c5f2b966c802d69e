#!/bin/bash
# Kill the operator (SIGKILL) mid-job and start it again: it adopts what exists and creates
# no duplicate pods (never more than the job's 3, never a pod that was not there before the
# kill), and the job succeeds.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "SIGKILL of the operator process it started"
use_namespace e2e-operator-restart
JOB=fmnist-ps-sync
job_yaml fmnist-ps-sync.yaml >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
wait_until 120 "worker-0 to train 100 steps" step_at_least $JOB-worker-0 100
uids() { k get pods -n "$NS" -l kubetrain.io/job-name=$JOB -o jsonpath='{.items[*].metadata.uid}' | tr ' ' '\n' | sort; }
before=$(uids)
[ "$(echo "$before" | wc -l)" = 3 ] || fail "expected 3 pods before the kill: $before"
pid=$(cat "$E2E_STATE/run/operator.pid")
log "SIGKILL the operator (pid $pid)"
kill -KILL "$pid"
wait_until 10 "the operator to exit" bash -c "! kill -0 $pid"
"$ROOT/scripts/local-cluster.sh" start-operator "$E2E_STATE"
deadline=$((SECONDS + 240))
until condition_true $JOB Succeeded; do
  condition_true $JOB Failed && fail "$JOB failed after the operator restart"
  [ $SECONDS -lt $deadline ] || fail "$JOB did not succeed within 240 s of the restart"
  extra=$(comm -13 <(echo "$before") <(uids))
  [ -z "$extra" ] || fail "new pods after the operator restart: $extra (before: $before)"
  sleep 0.5
done
log "$JOB Succeeded with no pod created after the restart"
assert_accuracy $JOB-worker-0
