#!/bin/bash
# A worker frozen with SIGSTOP fails nothing: its pod stays Running. The operator reads every
# replica's metrics and, stallTimeoutSeconds after the last step anywhere, sets Stalled naming
# worker-1; with stallPolicy Restart it recreates only worker-1, and the job still succeeds
# above the accuracy bar. Reports how long the Stalled verdict took.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "SIGSTOP of a container's process"
use_namespace e2e-stall
JOB=fmnist-ps-sync
STALL_TIMEOUT=5
job_json fmnist-ps-sync.yaml "
j['spec']['runPolicy'].update({'stallTimeoutSeconds': $STALL_TIMEOUT, 'stallPolicy': 'Restart'})
# A stopped process ignores SIGTERM until SIGKILL: a short grace period.
j['spec']['replicaSpecs']['Worker']['template']['spec']['terminationGracePeriodSeconds'] = 3
" >"$E2E_STATE/$NS.json"
k apply -n "$NS" -f "$E2E_STATE/$NS.json"
wait_until 120 "worker-1 to train 100 steps" step_at_least $JOB-worker-1 100
uid=$(k get pod $JOB-worker-1 -n "$NS" -o jsonpath='{.metadata.uid}')
pid=$(pod_field $JOB-worker-1 "['pids']['kubetrain']")
log "SIGSTOP worker-1 (pid $pid) at step $(current_step $JOB-worker-1)"
t0=$(now_ms)
kill -STOP "$pid"
stalled_event() { [ -n "$(event_message $JOB Stalled)" ]; }
wait_until 60 "the Stalled event" stalled_event
took=$(( $(now_ms) - t0 ))
msg=$(event_message $JOB Stalled)
log "Stalled after ${took} ms (stallTimeoutSeconds $STALL_TIMEOUT, progress poll ${PROGRESS_INTERVAL}): $msg"
case "$msg" in
  *"worker-1 (pod $JOB-worker-1"*"stopped answering"*) ;;
  *) fail "the Stalled event does not name the frozen worker-1: $msg" ;;
esac
case "$msg" in *"worker-0 ("*) fail "the Stalled event blames worker-0 too: $msg" ;; esac
# The timeout, one poll, a metrics fetch's 2 s timeout and the reconcile: well under 15 s.
[ "$took" -le 15000 ] || fail "Stalled took ${took} ms, more than stallTimeoutSeconds + 10 s"
[ "$took" -ge $((STALL_TIMEOUT * 1000 - 1000)) ] || fail "Stalled after ${took} ms, before the ${STALL_TIMEOUT} s timeout"
wait_until 60 "a new worker-1 pod" bash -c \
  "u=\$(\"$K\" get pod $JOB-worker-1 -n $NS -o jsonpath='{.metadata.uid}' 2>/dev/null); [ -n \"\$u\" ] && [ \"\$u\" != $uid ]"
log "worker-1 replaced by a new pod"
kill -CONT "$pid" 2>/dev/null || true  # gone already with its pod; harmless otherwise
case "$msg" in *"restarting the replicas behind"*) ;; *) fail "the Stalled event does not say the replicas behind restart: $msg" ;; esac
wait_job $JOB 300
restarts=$(k get tj $JOB -n "$NS" -o jsonpath='{.status.restartCount}')
[ "${restarts:-0}" -ge 1 ] || fail "restartCount ${restarts:-0}: the stalled replica's restart was not counted"
assert_accuracy $JOB-worker-0
