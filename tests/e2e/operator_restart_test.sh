#!/bin/bash
# Kill the operator (SIGKILL) mid-job and start it again: it adopts what exists, creates no
# duplicate pods, and the job succeeds.
source "$(dirname "$0")/lib.sh"
require_cluster
use_namespace e2e-operator-restart
JOB=fmnist-ps-sync
job_yaml fmnist-ps-sync.yaml >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
wait_until 120 "worker-0 to train 100 steps" step_at_least $JOB-worker-0 100
uids_before=$(k get pods -n "$NS" -l kubetrain.io/job-name=$JOB -o jsonpath='{.items[*].metadata.uid}')
pid=$(cat "$E2E_STATE/run/operator.pid")
log "SIGKILL the operator (pid $pid)"
kill -KILL "$pid"
wait_until 10 "the operator to exit" bash -c "! kill -0 $pid"
"$ROOT/scripts/local-cluster.sh" start-operator "$E2E_STATE"
wait_job $JOB 240
uids_after=$(k get pods -n "$NS" -l kubetrain.io/job-name=$JOB -o jsonpath='{.items[*].metadata.uid}')
[ "$(echo $uids_before | tr ' ' '\n' | sort)" = "$(echo $uids_after | tr ' ' '\n' | sort)" ] ||
  fail "pods changed across the operator restart: before [$uids_before] after [$uids_after]"
n=$(echo $uids_after | wc -w)
[ "$n" = 3 ] || fail "$n pods for a 3-replica job"
log "the same 3 pods before and after the restart; no duplicates"
assert_accuracy $JOB-worker-0
