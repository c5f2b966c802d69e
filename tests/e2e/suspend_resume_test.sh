#!/bin/bash
# Suspend and resume with a checkpoint (issue 29, checkpoint before disruption): an allreduce
# job with a checkpoint directory trains; `kubectl patch` spec.runPolicy.suspend=true makes the
# operator delete its pods with their grace period; on SIGTERM worker-0 stops at a step boundary
# and writes a checkpoint, naming it in its termination message. The job turns Suspended only
# once the pods are gone, its message naming that step, and status.lastCheckpoint records it.
# Resume recreates the pods, worker-0 logs "restored PATH (step N)" for that very checkpoint
# (step continuity), and the job succeeds.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "a checkpoint directory on this machine"
use_namespace e2e-suspend-resume
JOB=fmnist-allreduce
CKPT=$E2E_STATE/$NS-checkpoints
rm -rf "$CKPT"
# Periodic checkpoints far apart: the newest one on resume is the suspend's.
E2E_EPOCHS=$E2E_MOVING_EPOCHS job_yaml fmnist-allreduce.yaml --checkpoint-dir "$CKPT" \
  --checkpoint-every-steps 1000000 --checkpoint-every-secs 0 >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
wait_until 120 "worker-0 to train 100 steps" step_at_least $JOB-worker-0 100
seen=$(current_step $JOB-worker-0)
log "suspending $JOB with worker-0 at step $seen"
suspend_t0=$(now_ms)
k patch tj $JOB -n "$NS" --type merge -p '{"spec":{"runPolicy":{"suspend":true}}}' >/dev/null
wait_until 90 "$JOB to be Suspended" condition_true $JOB Suspended
log "Suspended after $(($(now_ms) - suspend_t0)) ms"
[ -z "$(job_pods $JOB)" ] || fail "Suspended while pods remain: $(job_pods $JOB | tr '\n' ' ')"
tj_field() { k get tj $JOB -n "$NS" -o jsonpath="$1"; }
step=$(tj_field '{.status.lastCheckpoint.step}')
replica=$(tj_field '{.status.lastCheckpoint.replica}')
path=$(tj_field '{.status.lastCheckpoint.path}')
[ -n "$step" ] || fail "no status.lastCheckpoint once Suspended: $(tj_field '{.status}')"
[ "$replica" = worker-0 ] || fail "status.lastCheckpoint.replica is '$replica', not worker-0"
[ "$step" -ge "$seen" ] || fail "checkpoint at step $step, before step $seen worker-0 had logged"
[ -f "$path" ] || fail "status.lastCheckpoint.path $path is no file"
message=$(tj_field '{.status.conditions[?(@.type=="Suspended")].message}')
case "$message" in
  *"checkpoint at step $step (worker-0)"*) ;;
  *) fail "the Suspended condition does not name the checkpoint: '$message'" ;;
esac
log "suspended with a checkpoint at step $step: $path"
k patch tj $JOB -n "$NS" --type merge -p '{"spec":{"runPolicy":{"suspend":false}}}' >/dev/null
restored() { pod_log $JOB-worker-0 | grep -qF "restored $path (step $step)"; }
wait_until 120 "worker-0 to restore the checkpoint of step $step" restored
log "worker-0 restored $path (step $step)"
wait_job $JOB 360
# Step continuity: training went on from the checkpoint, not from 0.
first=$(pod_log $JOB-worker-0 | sed -n '/restored /,$ s/^progress step=\([0-9]*\)\/.*/\1/p' | sed -n 1p)
[ -n "$first" ] && [ "$first" -gt "$step" ] ||
  fail "after the restore worker-0's first progress step is '$first', not after $step"
log "after the resume worker-0 went on at step $first"
assert_accuracy $JOB-worker-0
