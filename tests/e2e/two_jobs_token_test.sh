#!/bin/bash
# Two jobs at once in two namespaces, each with its own job token (a Secret the operator
# makes). A worker of job A, pointed at job B's parameter server (same model, same port),
# is refused; B's PS logs the refusal and counts it (kubetrain_ps_rejected_pushes_total,
# reason bad_token); both jobs still succeed.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "a pod's network namespace"
JOB=fmnist-ps-sync
A=e2e-token-a
B=e2e-token-b
# A first: the rogue needs only A's worker-0 process (its environment); B second, so that
# B's PS is young and still serving when the rogue calls.
# Both train 10 epochs: the rogue runs inside A's worker-0 network namespace, which the agent
# removes when that pod ends, and calls B's PS, which must still serve. A 2-epoch job now ends
# in about 8 s, less than the rogue's start-up plus its 10 s peer timeout (it then saw
# Deadline Exceeded instead of the refusal).
use_namespace $A
E2E_EPOCHS=10 job_yaml fmnist-ps-sync.yaml >"$E2E_STATE/$A.yaml"
k apply -n $A -f "$E2E_STATE/$A.yaml"
use_namespace $B
k apply -n $B -f "$E2E_STATE/$A.yaml"
ps_listening() { pod_log $JOB-ps-0 | grep -q "listening on port"; }
NS=$A wait_until 120 "job A's worker-0 process" pod_field $JOB-worker-0 "['pids']['kubetrain']"
NS=$B wait_until 120 "job B's parameter server to listen" ps_listening
ta=$(k get secret -n $A -l kubetrain.io/job-name=$JOB -o jsonpath='{.items[0].data.token}' | base64 -d)
tb=$(k get secret -n $B -l kubetrain.io/job-name=$JOB -o jsonpath='{.items[0].data.token}' | base64 -d)
[ -n "$ta" ] && [ "$ta" != "$tb" ] || fail "the two jobs do not have distinct tokens"
# A's worker-0 environment (its token included), re-aimed at B's PS, run inside A's worker-0
# network namespace.
pid=$(NS=$A pod_field $JOB-worker-0 "['pids']['kubetrain']")
netns=$(NS=$A pod_field $JOB-worker-0 "['netns']")
runtime=$(tr '\0' '\n' </proc/$pid/cmdline | head -1)
log "a worker of $A (token ${ta:0:4}...) pushes to $B's parameter server"
set +e
python3 - "$pid" "$netns" "$runtime" "$A" "$B" >"$E2E_STATE/rogue.log" 2>&1 <<'PY'
import os, subprocess, sys
pid, netns, runtime, a, b = sys.argv[1:]
env = dict(kv.split("=", 1) for kv in open(f"/proc/{pid}/environ").read().split("\0") if "=" in kv)
for k in ("TF_CONFIG", "KUBETRAIN_PS_HOSTS"):
    env[k] = env[k].replace(f"fmnist-ps-sync-ps-0.{a}.svc", f"fmnist-ps-sync-ps-0.{b}.svc")
env["KUBETRAIN_METRICS_PORT"] = "0"  # the real worker-0 holds 8090 in this namespace
r = subprocess.run(["ip", "netns", "exec", netns, "timeout", "60", runtime, "train", "--model", "mlp",
                    "--epochs", "1", "--exchange-mode", "sync", "--peer-timeout", "10"], env=env)
print(f"rogue worker exit code {r.returncode}")
sys.exit(r.returncode)
PY
rc=$?
set -e
tail -3 "$E2E_STATE/rogue.log"
[ $rc != 0 ] || fail "the rogue worker was accepted by $B's PS"
grep -q "wrong job token" "$E2E_STATE/rogue.log" || fail "the rogue worker was not told its token is wrong"
NS=$B
# Counted: B's PS metrics while it runs, else (the job may be done by now) the stats line it
# logs when it stops.
ps_ip=$(k get pod $JOB-ps-0 -n $B -o jsonpath='{.status.podIP}' 2>/dev/null || true)
count=$( (curl -s -m 5 "http://$ps_ip:8090/metrics" || true) |
  sed -n 's/^kubetrain_ps_rejected_pushes_total{.*reason="bad_token".*} \([0-9.e+]*\)$/\1/p')
where="kubetrain_ps_rejected_pushes_total{reason=\"bad_token\"}"
if [ -z "$count" ]; then
  wait_until 240 "job B to succeed" condition_true $JOB Succeeded
  count=$(pod_log $JOB-ps-0 | sed -n 's/.*stats .* rejected=\([0-9]*\).*/\1/p' | tail -1)
  where="the PS's final stats line (rejected=)"
fi
python3 -c "import sys; sys.exit(0 if float('${count:-0}') >= 1 else 1)" ||
  fail "the refusal was not counted (${count:-nothing} in $where)"
grep -q "rejected push: register from .*wrong job token" <(pod_log $JOB-ps-0) ||
  fail "$B's PS did not log the refusal"
log "$B's PS logged: $(pod_log $JOB-ps-0 | grep -m1 'rejected push: register' | sed 's/^info //')"
log "and counted it: $count in $where"
NS=$A wait_job $JOB 240
NS=$A assert_accuracy $JOB-worker-0
NS=$B wait_job $JOB 240
NS=$B assert_accuracy $JOB-worker-0
