#!/bin/bash
# Time to recover from a lost worker, restart in place against the whole-job restart, on the
# local cluster (scripts/local-cluster.sh: a real control plane when one is found, else the API
# emulator; the operator; the node agent), in one run.
#
# Each round runs the same allreduce job (examples/fmnist-allreduce.yaml with --workers
# replicas, --log-every 10, a checkpoint every --checkpoint-every steps) twice: once with --on-peer-loss reform
# (the default: the survivors re-form the world and the lost pod's replacement takes their
# state) and once with --on-peer-loss exit (before issue 29: every rank exits 129, the operator
# recreates every pod, worker-0 restores its newest checkpoint). When worker-0 has passed
# --kill-at steps, worker-1's process is SIGKILLed; the recovery time is from the kill until
# worker-0 logs progress beyond the step it had reached (reform: its first progress line after
# "generation 2 formed"; exit: the first line of its new pod beyond that step). Pods recreated
# counts the job's pods whose UID changed.
#
#   bench/recovery.sh [--rounds 3] [--workers 3] [--kill-at 200] [--checkpoint-every 50]
#                     [--state DIR]
#
# The whole-job restart loses the steps since the newest checkpoint: --kill-at half of
# --checkpoint-every past a multiple of it is the mean loss for a kill at a random time
# (--checkpoint-every 500 --kill-at 250: the runtime's default cadence).
#
# Prints one row per run, then the medians and their ratio (reform / exit). Needs a build
# (BUILD_DIR, default build) and root for the node agent's network namespaces (without root it
# falls back to loopback and says so). Stops the cluster it started.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 workers=3 kill_at=200 every=50 state=/tmp/kubetrain-recovery
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --workers) workers=$2; shift ;;
    --kill-at) kill_at=$2; shift ;;
    --checkpoint-every) every=$2; shift ;;
    --state) state=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set /!p}' "$0"; exit 0 ;;
    *) echo "recovery.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$workers" -ge 2 ] || { echo "recovery.sh: --workers must be >= 2" >&2; exit 2; }
export PROGRESS_INTERVAL=${PROGRESS_INTERVAL:-500ms}
eval "$(scripts/local-cluster.sh up "$state" | grep '^export ')"
trap 'scripts/local-cluster.sh down "$state" >/dev/null 2>&1 || true' EXIT
if [ -x .cache/tools/bin/kubectl ]; then K=.cache/tools/bin/kubectl; else K=$(command -v kubectl); fi
JOB=fmnist-allreduce
source scripts/lib-kubectl.sh
now_ms() { date +%s%3N; }
uid() { k get pod "$JOB-worker-$1" -n "$NS" -o jsonpath='{.metadata.uid}' 2>/dev/null || true; }
logs() { k logs -n "$NS" "$JOB-worker-0" 2>/dev/null || true; }
last_step() { logs | sed -n 's/^progress step=\([0-9]*\)\/.*/\1/p' | tail -1; }
pid_of() {  # the node agent's pid of the pod's container, once its state is the current pod's
  local u; u=$(uid "$1")
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['uid'] == sys.argv[2] and d['pids'].get('kubetrain') else 1); " \
    "$state/node/pods/${NS}_$JOB-worker-$1.json" "$u" 2>/dev/null || return 1
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pids']['kubetrain'])" \
    "$state/node/pods/${NS}_$JOB-worker-$1.json"
}
job() {  # job MODE: the job's YAML
  sed -e "s|replicas: 2|replicas: $workers|" \
      -e "s|\"--epochs\", \"[0-9]*\"|\"--epochs\", \"40\", \"--log-every\", \"10\", \"--on-peer-loss\", \"$1\", \"--checkpoint-dir\", \"/tmp/$JOB-$1-ckpt\", \"--checkpoint-every-steps\", \"$every\"|" \
      examples/fmnist-allreduce.yaml
}
wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local deadline=$((SECONDS + $1)) what=$2; shift 2
  until "$@"; do
    [ $SECONDS -lt $deadline ] || { echo "recovery.sh: timed out waiting for $what" >&2; exit 1; }
    sleep 0.1
  done
}
declare -A results
printf '%-7s %5s %10s %15s\n' mode round recovery_s pods_recreated
for round in $(seq 1 "$rounds"); do
  for mode in reform exit; do
    # Each run in a namespace of its own: nothing of the last run is mistaken for this one's.
    NS=recovery-$mode-$round
    k create namespace "$NS" >/dev/null
    rm -rf "/tmp/$JOB-$mode-ckpt"
    job "$mode" | k apply -n "$NS" -f - >/dev/null
    reached() { [ "$(last_step)" -ge "$kill_at" ] 2>/dev/null; }
    wait_for 300 "worker-0 to reach step $kill_at" reached
    declare -A before=()
    for i in $(seq 0 $((workers - 1))); do before[$i]=$(uid "$i"); done
    wait_for 30 "worker-1's process" pid_of 1 >/dev/null
    victim=$(pid_of 1)
    at=$(last_step)
    t0=$(now_ms)
    kill -KILL "$victim"
    if [ "$mode" = reform ]; then
      back() { logs | sed -n '/generation 2 formed/,$p' | grep -q '^progress step='; }
    else
      back() {
        [ "$(uid 0)" != "${before[0]}" ] || return 1
        local s; s=$(last_step)
        [ -n "$s" ] && [ "$s" -gt "$at" ]
      }
    fi
    wait_for 300 "worker-0 to train again" back
    t1=$(now_ms)
    recreated=0
    for i in $(seq 0 $((workers - 1))); do [ "$(uid "$i")" = "${before[$i]}" ] || recreated=$((recreated + 1)); done
    s=$(python3 -c "print(f'{($t1 - $t0) / 1000:.2f}')")
    results[$mode]+="$s "
    printf '%-7s %5s %10s %15s\n' "$mode" "$round" "$s" "$recreated"
    k delete namespace "$NS" --wait=true --timeout=120s >/dev/null
  done
done
python3 - "${results[reform]}" "${results[exit]}" <<'PY'
import statistics, sys
r = [float(x) for x in sys.argv[1].split()]
e = [float(x) for x in sys.argv[2].split()]
mr, me = statistics.median(r), statistics.median(e)
print(f"median reform {mr:.2f} s, exit {me:.2f} s, ratio reform/exit {mr / me:.2f}")
PY
