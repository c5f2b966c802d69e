#!/bin/bash
# kubectl apply -f examples/fmnist-allreduce.yaml (E2E_MOVING_EPOCHS epochs, cleanPodPolicy All) ->
# kubectl wait Succeeded -> worker-0's log reaches the accuracy bar; every pod is gone;
# `kubectl get tj` showed STEP/LOSS/ACCURACY moving.
source "$(dirname "$0")/lib.sh"
require_cluster
use_namespace e2e-allreduce
JOB=fmnist-allreduce
E2E_EPOCHS=$E2E_MOVING_EPOCHS job_yaml fmnist-allreduce.yaml | sed 's/cleanPodPolicy: Running/cleanPodPolicy: All/' >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
record_tj_rows $JOB "$E2E_STATE/$NS.rows" 240
wait_job $JOB 10
assert_rows_moved "$E2E_STATE/$NS.rows"
assert_accuracy $JOB-worker-0
no_pods() { [ -z "$(job_pods $JOB)" ]; }
wait_until 60 "every pod of $JOB to be deleted (cleanPodPolicy All)" no_pods
log "pods gone"
