#!/bin/bash
# Why a replica failed, in the job's own status, for what needs no second node: a config error
# (ConfigError with the runtime's own line as message, no retries), a pod the control plane
# deletes with DisruptionTarget as kube-scheduler's preemption does (Preempted, recreated, not
# counted toward backoffLimit), and a replica no node can take (Unschedulable naming it with
# the scheduler's message). Reports how long each verdict took.
source "$(dirname "$0")/lib.sh"
require_cluster
use_namespace e2e-failure-reasons
status_of() { k get tj "$1" -n "$NS" -o jsonpath="$2"; }

# 1. ConfigError: an unknown model; restartPolicy ExitCode fails the job at once.
job_json fmnist-allreduce.yaml "
j['metadata']['name'] = 'cfg'
for r in j['spec']['replicaSpecs'].values():
    c = r['template']['spec']['containers'][0]
    c['args'] = ['nosuchmodel' if a == 'mlp' else a for a in c['args']]
" >"$E2E_STATE/$NS-cfg.json"
t0=$(now_ms)
k apply -n "$NS" -f "$E2E_STATE/$NS-cfg.json"
failed() { condition_true "$1" Failed; }
wait_until 120 "cfg to fail" failed cfg
took=$(( $(now_ms) - t0 ))
reason=$(status_of cfg '{.status.lastFailure.reason}')
message=$(status_of cfg '{.status.lastFailure.message}')
log "cfg Failed ${took} ms after it was created: lastFailure $reason: $message"
[ "$reason" = ConfigError ] || fail "lastFailure.reason '$reason', want ConfigError"
case "$message" in *"kubetrain: error: "*"model 'nosuchmodel'"*) ;; *) fail "lastFailure.message lacks the runtime's line: $message" ;; esac
case "$(status_of cfg '{.status.conditions[?(@.type=="Failed")].message}')" in
  *ConfigError*"kubetrain: error:"*) ;;
  *) fail "the Failed condition does not carry the failure" ;;
esac
[ "$(status_of cfg '{.status.restartCount}')" = 0 ] || fail "a config error was retried"
k delete tj cfg -n "$NS" --wait=false >/dev/null

# 2. Preempted: DisruptionTarget, then a graceful delete, as kube-scheduler does.
JOB=fmnist-ps-sync
job_yaml fmnist-ps-sync.yaml >"$E2E_STATE/$NS-pre.yaml"
k apply -n "$NS" -f "$E2E_STATE/$NS-pre.yaml"
wait_until 120 "worker-1 to train 20 steps" step_at_least $JOB-worker-1 20
uid=$(k get pod $JOB-worker-1 -n "$NS" -o jsonpath='{.metadata.uid}')
k patch pod $JOB-worker-1 -n "$NS" --subresource=status --type=merge -p '{"status":{"conditions":[{"type":"DisruptionTarget","status":"True","reason":"PreemptionByScheduler","message":"kube-scheduler: preempting to accommodate a higher priority pod"}]}}' >/dev/null
t0=$(now_ms)
k delete pod $JOB-worker-1 -n "$NS" --wait=false >/dev/null
preempted() { [ "$(status_of $JOB '{.status.lastFailure.reason}')" = Preempted ]; }
wait_until 60 "lastFailure Preempted" preempted
took=$(( $(now_ms) - t0 ))
log "Preempted in status ${took} ms after the delete: $(event_message $JOB Preempted)"
[ "$(status_of $JOB '{.status.lastFailure.podUID}')" = "$uid" ] || fail "lastFailure names another pod"
new_worker() {
  local u
  u=$(k get pod $JOB-worker-1 -n "$NS" -o jsonpath='{.metadata.uid}' 2>/dev/null)
  [ -n "$u" ] && [ "$u" != "$uid" ]
}
wait_until 60 "a new worker-1 pod" new_worker
[ "$(status_of $JOB '{.status.disruptionCount}')" = 1 ] || fail "disruptionCount $(status_of $JOB '{.status.disruptionCount}'), want 1"
[ "$(status_of $JOB '{.status.restartCount}')" = 0 ] || fail "the preemption counted toward backoffLimit"
k delete tj $JOB -n "$NS" --wait=false >/dev/null

# 3. Unschedulable: a worker asking for more CPU than any node has.
job_json fmnist-allreduce.yaml "
j['metadata']['name'] = 'big'
j['spec']['runPolicy'].update({'schedulingTimeoutSeconds': 2, 'unschedulablePolicy': 'Fail'})
w = j['spec']['replicaSpecs']['Worker']['template']['spec']['containers'][0]
w.setdefault('resources', {}).setdefault('requests', {})['cpu'] = '512'
" >"$E2E_STATE/$NS-big.json"
t0=$(now_ms)
k apply -n "$NS" -f "$E2E_STATE/$NS-big.json"
wait_until 60 "big to fail" failed big
took=$(( $(now_ms) - t0 ))
message=$(status_of big '{.status.conditions[?(@.type=="Unschedulable")].message}')
log "big Unschedulable ${took} ms after it was created: $message"
case "$message" in
  *"not scheduled within 2 s"*"worker-0 (pod big-worker-0)"*"Insufficient cpu"*) ;;
  *) fail "the Unschedulable condition does not name the pods and the scheduler's message: $message" ;;
esac
[ "$(status_of big '{.status.conditions[?(@.type=="Failed")].reason}')" = Unschedulable ] ||
  fail "Failed reason is not Unschedulable"
