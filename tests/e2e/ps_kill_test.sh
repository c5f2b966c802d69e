#!/bin/bash
# SIGKILL the parameter server mid-run: restartPolicy OnFailure restarts it in place (the
# node agent), it resumes from its last checkpoint (every 100 steps), the workers re-register
# and the job succeeds; at most one checkpoint interval is repeated.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "SIGKILL of the PS process"
use_namespace e2e-ps-kill
JOB=fmnist-ps-sync
CKPT=$E2E_STATE/$NS-checkpoints
rm -rf "$CKPT"
job_yaml fmnist-ps-sync.yaml --checkpoint-dir "$CKPT" --checkpoint-every-steps 100 >"$E2E_STATE/$NS.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml"
wait_until 120 "worker-0 to train 250 steps" step_at_least $JOB-worker-0 250
pid=$(pod_field $JOB-ps-0 "['pids']['kubetrain']")
killed_at=$(current_step $JOB-worker-0)
log "SIGKILL the PS (pid $pid) with worker-0 at step $killed_at"
kill -KILL "$pid"
wait_until 60 "the PS to restart in place" bash -c \
  "[ \"\$(\"$K\" get pod $JOB-ps-0 -n $NS -o jsonpath='{.status.containerStatuses[0].restartCount}')\" -ge 1 ]"
wait_job $JOB 240
resumed=$(pod_log $JOB-ps-0 | sed -n 's/.* resumed at step \([0-9]*\).*/\1/p' | tail -1)
[ -n "$resumed" ] || fail "the restarted PS did not resume from a checkpoint: $(pod_log $JOB-ps-0 | tail -5)"
log "PS resumed at step $resumed; workers were at step $killed_at when it was killed"
# Global steps count both workers' pushes per sync step: compare in worker steps.
python3 - "$resumed" "$killed_at" <<'PY' || fail "more than one checkpoint interval repeated"
import sys
resumed, killed = int(sys.argv[1]), int(sys.argv[2])
print(f"repeated at most {killed - resumed} steps (interval 100)")
sys.exit(0 if killed - resumed <= 100 + 10 else 1)
PY
assert_accuracy $JOB-worker-0
