#!/bin/bash
# kubectl logs and the pod proxy through the API server: kube-apiserver (or the emulator)
# forwards pods/log to the node agent's kubelet endpoint (HTTPS, the Node's address and
# daemonEndpoints port) and pods/proxy to the pod's address. A job runs; `kubectl logs` shows a
# worker's progress lines; the worker is SIGKILLed and restarted in place (restartPolicy
# OnFailure), so `kubectl logs --previous` shows the old run and `kubectl logs` the new one;
# `kubectl logs -f` follows worker-0 to its end; `kubectl get --raw .../pods/POD:8090/proxy/
# metrics` returns the runtime's Prometheus text.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "SIGKILL of a container's process and its log file"
use_namespace e2e-kubectl-logs
JOB=fmnist-ps-sync
W0=$JOB-worker-0 W1=$JOB-worker-1
job_json fmnist-ps-sync.yaml "j['spec']['replicaSpecs']['Worker']['restartPolicy'] = 'OnFailure'" \
  >"$E2E_STATE/$NS.json"
k apply -n "$NS" -f "$E2E_STATE/$NS.json" >/dev/null
# The last step a pod logged, read through kubectl logs (not the agent's file, which an earlier
# pod of the same name may have left).
kubectl_step() {
  local s
  s=$(k logs -n "$NS" "$1" 2>/dev/null | sed -n 's/^progress step=\([0-9]*\)\/.*/\1/p' | tail -1)
  [ "${s:-0}" -ge "$2" ]
}
# Running first: until the agent starts a pod it serves the log of an earlier pod of that name.
wait_until 120 "$W1 Running" bash -c \
  "[ \"\$(\"$K\" get pod $W1 -n $NS -o jsonpath='{.status.phase}' 2>/dev/null)\" = Running ]"
wait_until 120 "worker-1 to train 50 steps (kubectl logs)" kubectl_step $W1 50

# kubectl logs: the runtime's progress lines, as the node agent's file has them.
k logs -n "$NS" $W1 >"$E2E_STATE/$NS.logs" || fail "kubectl logs $W1 failed"
grep -q '^progress step=' "$E2E_STATE/$NS.logs" || fail "kubectl logs $W1 shows no progress lines: $(tail -3 "$E2E_STATE/$NS.logs")"
log "kubectl logs $W1: $(wc -l <"$E2E_STATE/$NS.logs") lines, last: $(grep '^progress' "$E2E_STATE/$NS.logs" | tail -1)"
[ "$(k logs -n "$NS" $W1 --tail=1 | wc -l)" = 1 ] || fail "kubectl logs --tail=1 gave not one line"

# The pod proxy: the runtime's metrics through the API server.
k get --raw "/api/v1/namespaces/$NS/pods/$W0:8090/proxy/metrics" >"$E2E_STATE/$NS.metrics" ||
  fail "kubectl get --raw .../pods/$W0:8090/proxy/metrics failed"
grep -q '^kubetrain_' "$E2E_STATE/$NS.metrics" || fail "no kubetrain_ metrics through the pod proxy: $(head -3 "$E2E_STATE/$NS.metrics")"
log "pod proxy: $(grep -c '^kubetrain_' "$E2E_STATE/$NS.metrics") kubetrain_ samples from $W0:8090/metrics"

# kubectl logs -f worker-0, in the background until its run ends.
k logs -f -n "$NS" $W0 >"$E2E_STATE/$NS.follow" 2>&1 &
follow_pid=$!

# --previous before any restart: the kubelet's error.
if k logs -n "$NS" $W1 --previous >"$E2E_STATE/$NS.err" 2>&1; then
  fail "kubectl logs --previous succeeded before any restart"
fi
grep -q "previous terminated container \".*\" in pod \"$W1\" not found" "$E2E_STATE/$NS.err" ||
  fail "kubectl logs --previous before a restart: $(cat "$E2E_STATE/$NS.err")"

# SIGKILL worker-1: OnFailure restarts it in place.
pid=$(pod_field $W1 "['pids']['kubetrain']")
log "SIGKILL $W1 (pid $pid) at step $(current_step $W1)"
kill -KILL "$pid"
wait_until 60 "$W1 to restart in place" bash -c \
  "[ \"\$(\"$K\" get pod $W1 -n $NS -o jsonpath='{.status.containerStatuses[0].restartCount}' 2>/dev/null)\" -ge 1 ]"
# In the back-off, --previous and the current log are both the killed run (as the kubelet's
# lastState); once it runs again they part.
k logs -n "$NS" $W1 --previous >/dev/null || fail "kubectl logs --previous failed in the restart back-off"
wait_until 60 "$W1 to run again" bash -c \
  "[ -n \"\$(\"$K\" get pod $W1 -n $NS -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}' 2>/dev/null)\" ]"
wait_until 60 "$W1's new run to log" bash -c "[ -n \"\$(\"$K\" logs -n $NS $W1 2>/dev/null)\" ]"
k logs -n "$NS" $W1 --previous >"$E2E_STATE/$NS.previous" || fail "kubectl logs --previous failed"
k logs -n "$NS" $W1 >"$E2E_STATE/$NS.current" || fail "kubectl logs after the restart failed"
pod_log $W1 >"$E2E_STATE/$NS.file"
python3 - "$E2E_STATE/$NS.previous" "$E2E_STATE/$NS.current" "$E2E_STATE/$NS.file" <<'PY' || fail "--previous and the current run do not split the log file"
import sys
prev, cur, whole = (open(p, 'rb').read() for p in sys.argv[1:4])
assert b'progress step=' in prev, 'the previous run has no progress lines'
assert whole.startswith(prev), 'the previous run is not the start of the file'
assert whole[len(prev):].startswith(cur), 'the current run does not follow the previous one'
assert cur and not prev.endswith(cur), 'the current run is empty'
print(f'previous run {len(prev)} bytes, current run {len(cur)} bytes so far')
PY
log "kubectl logs --previous: $(wc -l <"$E2E_STATE/$NS.previous") lines (last step $(sed -n 's/^progress step=\([0-9]*\)\/.*/\1/p' "$E2E_STATE/$NS.previous" | tail -1)); kubectl logs: the new run"

wait_job $JOB 300
# The follow ends by itself when worker-0's run ends.
for _ in $(seq 1 60); do kill -0 $follow_pid 2>/dev/null || break; sleep 0.5; done
if kill -0 $follow_pid 2>/dev/null; then kill $follow_pid; fail "kubectl logs -f did not end with the container"; fi
wait $follow_pid || fail "kubectl logs -f failed: $(tail -3 "$E2E_STATE/$NS.follow")"
grep -q 'final test_accuracy=' "$E2E_STATE/$NS.follow" || fail "kubectl logs -f missed the end: $(tail -3 "$E2E_STATE/$NS.follow")"
cmp -s <(pod_log $W0) "$E2E_STATE/$NS.follow" || fail "kubectl logs -f differs from $W0's log file"
log "kubectl logs -f followed $W0 to its end ($(wc -l <"$E2E_STATE/$NS.follow") lines, $(grep -c '^progress step=' "$E2E_STATE/$NS.follow") progress lines)"
