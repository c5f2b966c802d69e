#!/bin/bash
# kubectl kubetrain (tools/kubectl_kubetrain/, docs/kubectl-plugin.md), run by kubectl as a
# plugin (kubectl-kubetrain on the PATH) against the local cluster, its logs and metrics read
# through the API server (pods/log forwarded to the node agent's kubelet endpoint, pods/proxy to
# the pod):
# 1. `kubectl kubetrain logs JOB -f` started with the job follows every replica under a
#    `[worker-1 r0] ` prefix; worker-1 is SIGKILLed and restarted in place (OnFailure), and its
#    new run appears under `[worker-1 r1] `, after the old one; the follow ends by itself when
#    the job Succeeds.
# 2. `kubectl kubetrain top JOB` on an allreduce job whose worker-1 is SIGSTOPped: worker-1's row
#    says its metrics cannot be read, worker-0's shows a stall and waits for worker-1.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "SIGKILL and SIGSTOP of containers' processes"
PLUGIN_DIR=$BUILD_DIR/tools/kubectl_kubetrain
[ -x "$PLUGIN_DIR/kubectl-kubetrain" ] || fail "no $PLUGIN_DIR/kubectl-kubetrain (build it)"
kt() { PATH="$PLUGIN_DIR:$PATH" "$K" kubetrain "$@"; }
use_namespace e2e-kubectl-kubetrain

# 1. logs -f across a restart in place.
JOB=fmnist-ps-sync
W1=$JOB-worker-1
E2E_EPOCHS=$E2E_MOVING_EPOCHS job_json fmnist-ps-sync.yaml \
  "j['spec']['replicaSpecs']['Worker']['restartPolicy'] = 'OnFailure'" >"$E2E_STATE/$NS.json"
k apply -n "$NS" -f "$E2E_STATE/$NS.json" >/dev/null
kt logs $JOB -f -n "$NS" >"$E2E_STATE/$NS.follow" 2>"$E2E_STATE/$NS.follow.err" &
follow_pid=$!
prefixed() { grep -q "^\[$1\] $2" "$E2E_STATE/$NS.follow"; }
wait_until 120 "[worker-1 r0] progress lines in the follow" prefixed "worker-1 r0" "progress step="
wait_until 120 "worker-1 to train 30 steps" step_at_least $W1 30
pid=$(pod_field $W1 "['pids']['kubetrain']")
log "SIGKILL $W1 (pid $pid) at step $(current_step $W1)"
kill -KILL "$pid"
wait_until 120 "[worker-1 r1] lines in the follow" prefixed "worker-1 r1" ""
wait_job $JOB 300
for _ in $(seq 1 120); do kill -0 $follow_pid 2>/dev/null || break; sleep 0.5; done
if kill -0 $follow_pid 2>/dev/null; then
  kill $follow_pid
  fail "kubectl kubetrain logs -f still follows 60 s after the job Succeeded"
fi
wait $follow_pid || fail "kubectl kubetrain logs -f exited $?: $(cat "$E2E_STATE/$NS.follow.err")"
for r in "worker-0 r0" "ps-0 r0"; do
  prefixed "$r" "" || fail "no [$r] lines in the follow: $(head -3 "$E2E_STATE/$NS.follow")"
done
first_r1=$(grep -n '^\[worker-1 r1\] ' "$E2E_STATE/$NS.follow" | sed -n 1p | cut -d: -f1)
last_r0=$(grep -n '^\[worker-1 r0\] ' "$E2E_STATE/$NS.follow" | tail -1 | cut -d: -f1)
[ "$last_r0" -lt "$first_r1" ] || fail "[worker-1 r0] lines after [worker-1 r1] ones (lines $last_r0, $first_r1)"
# Each run's lines once: the follow holds exactly what the node agent's file holds for worker-1.
diff <(pod_log $W1) <(sed -n 's/^\[worker-1 r[01]\] //p' "$E2E_STATE/$NS.follow") >"$E2E_STATE/$NS.diff" ||
  fail "worker-1's lines in the follow differ from its log: $(head -5 "$E2E_STATE/$NS.diff")"
log "logs -f: $(grep -c '^\[worker-1 r0\]' "$E2E_STATE/$NS.follow") lines of [worker-1 r0], $(grep -c '^\[worker-1 r1\]' "$E2E_STATE/$NS.follow") of [worker-1 r1], ended with the job"

# 2. top shows a frozen worker's stall.
JOB=fmnist-allreduce
E2E_EPOCHS=30 job_yaml fmnist-allreduce.yaml --stall-warning 2 >"$E2E_STATE/$NS-ar.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS-ar.yaml" >/dev/null
wait_until 120 "$JOB-worker-1 to train 20 steps" step_at_least $JOB-worker-1 20
pid=$(pod_field $JOB-worker-1 "['pids']['kubetrain']")
log "SIGSTOP $JOB-worker-1 (pid $pid) at step $(current_step $JOB-worker-1)"
kill -STOP "$pid"
trap 'kill -CONT '"$pid"' 2>/dev/null; cleanup_namespaces' EXIT
row() { awk -v r="$1" '$1 == r' "$E2E_STATE/$NS.top"; }
stalled_row() {
  kt top $JOB -n "$NS" >"$E2E_STATE/$NS.top" 2>&1 || return 1
  # worker-0: a stall in seconds and worker-1 as the one it waits for.
  row worker-0 | grep -Eq ' [0-9]+(\.[0-9]+)?s +worker-1$' &&
    row worker-1 | grep -q 'metrics'
}
wait_until 60 "kubectl kubetrain top to show worker-0 waiting for worker-1" stalled_row
log "kubectl kubetrain top:"
cat "$E2E_STATE/$NS.top"
kill -CONT "$pid"
