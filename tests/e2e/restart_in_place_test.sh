#!/bin/bash
# Restart in place (issue 29): a 3-worker allreduce job loses worker-1, then worker-0 (the
# rendezvous host), each SIGKILLed mid-run. Only the lost pod is recreated: the survivors keep
# their pod UIDs and restartCount 0, nobody exits 129, each survivor runs the aborted step again
# (at most one step lost), the job succeeds above the accuracy bar, and every rank ends with the
# same parameters. Prints the time from each kill to the re-formed world.
source "$(dirname "$0")/lib.sh"
require_cluster
require_node_agent "SIGKILL of a container's process"
use_namespace e2e-restart-in-place
JOB=fmnist-allreduce
E2E_EPOCHS=12 job_json fmnist-allreduce.yaml 'j["spec"]["replicaSpecs"]["Worker"]["replicas"] = 3' \
  --log-every 20 --batch-size 32 --peer-timeout 30 >"$E2E_STATE/$NS.json"
k apply -n "$NS" -f "$E2E_STATE/$NS.json"
uid() { k get pod "$JOB-worker-$1" -n "$NS" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
restarts() { k get pod "$JOB-worker-$1" -n "$NS" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
formed() { pod_log "$JOB-worker-$1" 2>/dev/null | grep -q "generation $2 formed"; }
last=0
generation=1
for victim in 1 0; do
  wait_until 180 "worker-2 to pass step $((last + 100))" step_at_least $JOB-worker-2 $((last + 100))
  last=$(current_step $JOB-worker-2)
  declare -A before=()
  for i in 0 1 2; do before[$i]=$(uid $i); done
  pid=$(pod_field $JOB-worker-$victim "['pids']['kubetrain']")
  log "SIGKILL worker-$victim (pid $pid) at step $last"
  t0=$(now_ms)
  kill -KILL "$pid"
  generation=$((generation + 1))
  survivor=$(( victim == 1 ? 2 : 1 ))
  wait_until 120 "worker-$survivor to form generation $generation" formed $survivor $generation
  log "generation $generation formed $(( $(now_ms) - t0 )) ms after the kill"
  [ "$(uid $victim)" != "${before[$victim]}" ] || fail "worker-$victim was not replaced by a new pod"
  for i in 0 1 2; do
    [ "$i" = "$victim" ] && continue
    [ "$(uid $i)" = "${before[$i]}" ] || fail "survivor worker-$i was replaced (uid ${before[$i]} -> $(uid $i))"
    [ "$(restarts $i)" = 0 ] || fail "survivor worker-$i restarted ($(restarts $i))"
  done
  log "survivors kept their pods, restartCount 0"
done
wait_job $JOB 300
for i in 0 1 2; do
  log_i=$(pod_log $JOB-worker-$i)
  if grep -q "kubetrain: error" <<<"$log_i"; then fail "worker-$i exited with an error: $(grep "kubetrain: error" <<<"$log_i")"; fi
  # "continuing at step S (was S+1)": the aborted step is the only one run again.
  while read -r at was; do
    [ $((was - at)) -le 1 ] || fail "worker-$i went back $((was - at)) steps (continuing at $at, was $was)"
  done < <(sed -n 's/.*continuing at step \([0-9]*\) (was \([0-9]*\)).*/\1 \2/p' <<<"$log_i")
done
events=$(k get events -n "$NS" -o jsonpath='{.items[*].message}')
if grep -q "code 129" <<<"$events"; then fail "a replica exited 129 (lost peer): $events"; fi
sums=$(for i in 0 1 2; do pod_log $JOB-worker-$i | sed -n 's/.*final parameters crc32c=\([0-9a-f]*\).*/\1/p' | tail -1; done | sort -u)
[ "$(wc -l <<<"$sums")" = 1 ] && [ -n "$sums" ] || fail "ranks ended with different parameters: $sums"
log "every rank ended with parameters crc32c=$sums"
assert_accuracy $JOB-worker-0
