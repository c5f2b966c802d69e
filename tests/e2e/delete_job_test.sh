#!/bin/bash
# kubectl delete tj mid-run: every pod, Service and Secret of the job is gone, and the
# node agent stopped their processes and released their network namespaces.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "the agent's record of what it runs"
use_namespace e2e-delete
JOB=fmnist-ps-sync
job_yaml fmnist-ps-sync.yaml >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
wait_until 120 "worker-0 to train 50 steps" step_at_least $JOB-worker-0 50
pids=""
for p in ps-0 worker-0 worker-1; do pids+=" $(pod_field $JOB-$p "['pids']['kubetrain']")"; done
log "kubectl delete tj $JOB (processes$pids)"
k delete tj $JOB -n "$NS" --wait=false
nothing_left() { [ -z "$(k get pods,services,secrets -n "$NS" -l kubetrain.io/job-name=$JOB -o name)" ]; }
wait_until 90 "every pod, service and secret of $JOB to be gone" nothing_left
for pid in $pids; do kill -0 "$pid" 2>/dev/null && fail "process $pid still runs"; done
ls "$E2E_STATE/node/pods/" | grep -q "^${NS}_" && fail "the node agent still tracks pods of $NS"
log "pods, services, secrets and processes gone"
