#!/bin/bash
# kubectl apply -f examples/fmnist-ps-sync.yaml (E2E_MOVING_EPOCHS epochs, cleanPodPolicy All so the
# PS pod must go) -> kubectl wait Succeeded -> worker-0's log reaches the accuracy bar; the
# PS pod is gone; `kubectl get tj` showed STEP/LOSS/ACCURACY moving during the run.
source "$(dirname "$0")/lib.sh"
require_cluster
use_namespace e2e-ps-sync
JOB=fmnist-ps-sync
E2E_EPOCHS=$E2E_MOVING_EPOCHS job_yaml fmnist-ps-sync.yaml | sed 's/cleanPodPolicy: Running/cleanPodPolicy: All/' >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
record_tj_rows $JOB "$E2E_STATE/$NS.rows" 240
wait_job $JOB 10
assert_rows_moved "$E2E_STATE/$NS.rows"
assert_accuracy $JOB-worker-0
wait_until 60 "the PS pod to be deleted (cleanPodPolicy All)" \
  bash -c "! \"$K\" get pod $JOB-ps-0 -n $NS >/dev/null 2>&1"
log "PS pod gone"
