#!/bin/bash
# SIGKILL a worker's process mid-run: restartPolicy ExitCode (137 is retryable) makes the
# operator replace the pod, and the job still succeeds with worker-0 above the bar.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "SIGKILL of a container's process"
use_namespace e2e-worker-kill
JOB=fmnist-ps-sync
job_yaml fmnist-ps-sync.yaml >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
wait_until 120 "worker-1 to train 100 steps" step_at_least $JOB-worker-1 100
uid=$(k get pod $JOB-worker-1 -n "$NS" -o jsonpath='{.metadata.uid}')
pid=$(pod_field $JOB-worker-1 "['pids']['kubetrain']")
log "SIGKILL worker-1 (pid $pid, pod uid $uid) at step $(current_step $JOB-worker-1)"
kill -KILL "$pid"
wait_until 60 "a new worker-1 pod" bash -c \
  "u=\$(\"$K\" get pod $JOB-worker-1 -n $NS -o jsonpath='{.metadata.uid}' 2>/dev/null); [ -n \"\$u\" ] && [ \"\$u\" != $uid ]"
log "worker-1 replaced by a new pod"
wait_job $JOB 240
assert_accuracy $JOB-worker-0
