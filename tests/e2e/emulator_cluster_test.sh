#!/bin/bash
# scripts/local-cluster.sh without the shared control-plane tool: `up --api emulator` serves the
# Kubernetes API from kubetrain-api-emulator (tools/api_emulator/). With kubectl only, as a user
# would: apply a short PS job, `kubectl wait --for=condition=Succeeded`, `kubectl get tj` with its
# STATUS/STEP/LOSS/ACCURACY columns filled, `kubectl get pods`, `kubectl delete tj` taking the
# job's pods, Services and Secret with it (garbage collection), then `down` leaving no process.
# Root: pods in network namespaces (bridge E2E_EMULATOR_BRIDGE, ktm0, on E2E_EMULATOR_SUBNET,
# 10.246.2); otherwise the agent's loopback fallback. Needs no control-plane tool.
set -uo pipefail
E2E_STATE=${E2E_EMULATOR_STATE:-/tmp/kubetrain-e2e-emulator}
source "$(dirname "$0")/lib.sh"
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
export NODE_BRIDGE=${E2E_EMULATOR_BRIDGE:-ktm0} NODE_SUBNET=${E2E_EMULATOR_SUBNET:-10.246.2}

if [ -x "$ROOT/.cache/tools/bin/kubectl" ]; then K=$ROOT/.cache/tools/bin/kubectl
elif command -v kubectl >/dev/null; then K=$(command -v kubectl)
else skip "no kubectl (scripts/setup.sh installs it)"; fi
[ -d /usr/share/datasets/fashion-mnist ] || skip "no Fashion-MNIST (dataset-fashion-mnist)"
[ -x "$BUILD_DIR/tools/api_emulator/kubetrain-api-emulator" ] ||
  fail "no $BUILD_DIR/tools/api_emulator/kubetrain-api-emulator (build it)"
[ "$(id -u)" = 0 ] || export NODE_NETWORK=loopback

"$ROOT/scripts/local-cluster.sh" down "$E2E_STATE" >/dev/null 2>&1
rm -rf "$E2E_STATE"
mkdir -p "$E2E_STATE"
teardown() {
  local rc=$? left
  set +e
  "$ROOT/scripts/local-cluster.sh" down "$E2E_STATE" >/dev/null 2>&1
  for f in "$E2E_STATE"/run/*.pid; do
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && { echo "FAIL: $f still runs"; rc=1; }
  done
  # Every container process the agent started ("... started, pid N: ...") is gone.
  for pid in $(sed -n 's/.* started, pid \([0-9]*\):.*/\1/p' "$E2E_STATE/logs/node-agent.log" 2>/dev/null); do
    kill -0 "$pid" 2>/dev/null && { echo "FAIL: pod process $pid left behind"; rc=1; }
  done
  exit $rc
}
trap teardown EXIT
start=$SECONDS
"$ROOT/scripts/local-cluster.sh" up --api emulator "$E2E_STATE" >/dev/null ||
  fail "local-cluster.sh up --api emulator failed: $(tail -5 "$E2E_STATE/logs/"*.log 2>/dev/null)"
log "emulator cluster up in $((SECONDS - start)) s"
export KUBECONFIG=$E2E_STATE/kcp/kubeconfig
grep -q "serving the Kubernetes API" "$E2E_STATE/logs/api-emulator.log" ||
  fail "the API emulator did not start: $(cat "$E2E_STATE/logs/api-emulator.log")"

# The emulator is this test's alone: its default namespace, so that no built-in object is written
# (kubectl >= 1.32 sends those as Protobuf, which the emulator does not read; docs/e2e.md).
NS=default
JOB=fmnist-ps-sync
E2E_EPOCHS=$E2E_MOVING_EPOCHS job_yaml fmnist-ps-sync.yaml >"$E2E_STATE/$NS.yaml"
# kubectl apply as a user runs it: with kubectl's default (strict) validation.
k apply -n "$NS" -f "$E2E_STATE/$NS.yaml" >/dev/null
record_tj_rows $JOB "$E2E_STATE/$NS.rows" 240
k wait --for=condition=Succeeded "tj/$JOB" -n "$NS" --timeout=30s >/dev/null ||
  fail "kubectl wait --for=condition=Succeeded tj/$JOB did not see it"
log "$JOB Succeeded (kubectl wait)"
assert_rows_moved "$E2E_STATE/$NS.rows"

# The columns kubectl prints from the CRD's additionalPrinterColumns.
header=$(k get tj -n "$NS" | sed -n 1p | tr -s ' ')
[ "$header" = "NAME STATUS STEP LOSS ACCURACY WORLD AGE" ] || fail "kubectl get tj header: '$header'"
read -r name status step loss acc age < <(k get tj "$JOB" -n "$NS" --no-headers)
log "kubectl get tj: $name $status $step $loss $acc $age"
[ "$status" = Succeeded ] || fail "STATUS column is '$status', not Succeeded"
[ "$step" -gt 0 ] 2>/dev/null || fail "STEP column is '$step'"
python3 -c "import sys; float(sys.argv[1]); float(sys.argv[2])" "$loss" "$acc" ||
  fail "LOSS/ACCURACY columns are not numbers: '$loss' '$acc'"
pods=$(k get pods -n "$NS" --no-headers | awk '{print $1 "=" $3}' | sort | tr '\n' ' ')
log "kubectl get pods: $pods"
case "$pods" in *"$JOB-worker-0=Completed"*) ;; *) fail "worker-0 is not Completed in kubectl get pods: $pods" ;; esac
assert_accuracy $JOB-worker-0

k delete tj "$JOB" -n "$NS" --timeout=60s >/dev/null || fail "kubectl delete tj $JOB failed"
wait_until 60 "the job's pods, Services and Secret to be garbage-collected" bash -c \
  "[ -z \"\$(\"$K\" get pods,svc,secrets -n $NS -l kubetrain.io/job-name=$JOB -o name 2>/dev/null)\" ]"
log "kubectl delete tj: pods, Services and Secret gone"
