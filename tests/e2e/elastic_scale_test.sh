#!/bin/bash
# Elastic workers (issue 29): an allreduce job with elasticPolicy {minReplicas: 2, maxReplicas: 4}
# is scaled 2 -> 4 -> 3 with `kubectl scale` mid-run. The runtime re-forms the world at each
# change (status.worldSize and status.generation follow, a MembershipChanged event each), the
# workers that stay keep their pods and restartCount 0, nobody exits 129, the job succeeds above
# the accuracy bar, and every rank left ends with the same parameters. A scale above maxReplicas
# is refused by the API server itself (the operator's admission webhook) and changes nothing.
source "$(dirname "$0")/lib.sh"
require_cluster
use_namespace e2e-elastic
JOB=fmnist-allreduce
E2E_EPOCHS=60 job_json fmnist-allreduce.yaml \
  'j["spec"]["elasticPolicy"] = {"minReplicas": 2, "maxReplicas": 4}' \
  --log-every 20 --batch-size 32 --train-limit 12000 >"$E2E_STATE/$NS.json"
k apply -n "$NS" -f "$E2E_STATE/$NS.json"
uid() { k get pod "$JOB-worker-$1" -n "$NS" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
restarts() { k get pod "$JOB-worker-$1" -n "$NS" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
status_of() { k get tj $JOB -n "$NS" -o jsonpath="$1"; }
world_is() { [ "$(status_of '{.status.worldSize}')" = "$1" ]; }
logged_world() { pod_log "$JOB-worker-0" 2>/dev/null | grep -q "formed at step [0-9]*: world $1"; }
wait_until 180 "worker-0 to pass step 100" step_at_least $JOB-worker-0 100
wait_until 60 "status.worldSize 2" world_is 2
u0=$(uid 0); u1=$(uid 1)
k scale "tj/$JOB" -n "$NS" --replicas=4 >/dev/null
log "scaled to 4 at step $(current_step $JOB-worker-0)"
wait_until 120 "worker-0 to train in a world of 4" logged_world 4
wait_until 60 "status.worldSize 4" world_is 4
u2=$(uid 2)
log "world 4, generation $(status_of '{.status.generation}'): $(event_message $JOB MembershipChanged)"
wait_until 120 "worker-3 to train" step_at_least $JOB-worker-3 1
k scale "tj/$JOB" -n "$NS" --replicas=3 >/dev/null
log "scaled to 3 at step $(current_step $JOB-worker-0)"
wait_until 120 "worker-0 to train in a world of 3" logged_world 3
wait_until 60 "status.worldSize 3" world_is 3
gone() { [ -z "$(uid 3)" ]; }
wait_until 60 "worker-3's pod to go" gone
log "world 3, generation $(status_of '{.status.generation}'): $(event_message $JOB MembershipChanged)"
if out=$(k scale "tj/$JOB" -n "$NS" --replicas=6 2>&1); then
  fail "kubectl scale --replicas=6 above maxReplicas 4 was accepted: $out"
fi
# kubectl prints a 422's causes: "The request is invalid: spec.replicas: Invalid value: 6: ...".
grep -q 'spec.replicas: Invalid value: 6: 6 is above spec.elasticPolicy.maxReplicas 4' <<<"$out" ||
  fail "kubectl scale --replicas=6 failed without the webhook's refusal: $out"
log "scale to 6 refused: $out"
[ "$(k get tj $JOB -n "$NS" -o jsonpath='{.spec.replicaSpecs.Worker.replicas}')" = 3 ] ||
  fail "the refused scale changed spec.replicaSpecs.Worker.replicas"
# The workers that stayed, while the job runs: same pods, no restart.
us=("$u0" "$u1" "$u2")
for i in 0 1 2; do
  [ "$(uid $i)" = "${us[$i]}" ] || fail "worker-$i, which stayed, was replaced"
  [ "$(restarts $i)" = 0 ] || fail "worker-$i restarted"
done
wait_job $JOB 400
# And at the end, for each pod cleanPodPolicy Running has not deleted yet (a worker still
# Running when worker-0's success ends the job is deleted).
for i in 0 1 2; do
  now=$(uid $i || true)
  [ -z "$now" ] || [ "$now" = "${us[$i]}" ] || fail "worker-$i, which stayed, was replaced"
  [ -z "$now" ] || [ "$(restarts $i)" = 0 ] || fail "worker-$i restarted"
done
[ "$(status_of '{.status.restartCount}')" = 0 ] || fail "the job counted restarts"
events=$(k get events -n "$NS" -o jsonpath='{.items[*].message}')
if grep -q "code 129" <<<"$events"; then fail "a replica exited 129 (lost peer): $events"; fi
[ "$(status_of '{.status.generation}')" -ge 3 ] || fail "status.generation $(status_of '{.status.generation}') < 3"
sums=$(for i in 0 1 2; do pod_log $JOB-worker-$i | sed -n 's/.*final parameters crc32c=\([0-9a-f]*\).*/\1/p' | tail -1; done | sort -u)
[ "$(wc -l <<<"$sums")" = 1 ] && [ -n "$sums" ] || fail "ranks ended with different parameters: $sums"
log "workers 0-2 ended with parameters crc32c=$sums"
assert_accuracy $JOB-worker-0
