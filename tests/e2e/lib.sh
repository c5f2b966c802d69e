# Shared by the e2e tests (sourced). The cluster is the CTest fixture started by
# cluster_up.sh (scripts/local-cluster.sh): real control plane, CRD, operator, node agent.
# Each test works in its own Kubernetes namespace, deleted on exit, and is bounded in time.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
E2E_STATE=${E2E_STATE:-/tmp/kubetrain-e2e}
export KUBETRAIN_KUBE_CONTROL_PLANE=${KUBETRAIN_KUBE_CONTROL_PLANE:-${E2E_DEFAULT_KUBE_CONTROL_PLANE:-}}
# The accuracy bar: docs/accuracy.md, one epoch of the mlp (fmnist_accuracy_test's 0.84); the
# e2e jobs train two epochs, 0.86 measured.
E2E_EPOCHS=${E2E_EPOCHS:-2}
E2E_ACCURACY_BAR=${E2E_ACCURACY_BAR:-0.84}
# The operator's progress poll for the clusters the tests start (local-cluster.sh's default is
# 2s), and the epochs of the jobs whose test asserts that `kubectl get tj` showed progress
# moving. The runtime updates kubetrain_global_step once a second, so the table can move only
# as often; on a quiet machine a 4-epoch allreduce job trained its 952 steps within 2 s of its
# creation, and the table showed step 0 and then the last step only. 12 epochs train for about
# 5 s there (longer under load): several steps for the table to show.
export PROGRESS_INTERVAL=${PROGRESS_INTERVAL:-500ms}
E2E_MOVING_EPOCHS=${E2E_MOVING_EPOCHS:-12}

log() { echo "[$(date -u +%H:%M:%S)] $*"; }
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*"
  if [ -n "${NS:-}" ]; then
    "$K" get tj,pods,svc -n "$NS" -o wide 2>&1 | grep -v WARNING || true
    "$K" get tj -n "$NS" -o jsonpath='{.items[*].status.conditions}' 2>/dev/null || true; echo
  fi
  tail -20 "$E2E_STATE/logs/node-agent.log" 2>/dev/null || true
  for f in "$E2E_STATE"/logs/node-agent-*.log; do [ -f "$f" ] && { echo "== $f"; tail -10 "$f"; }; done
  tail -20 "$E2E_STATE/logs/operator.log" 2>/dev/null || true
  exit 1
}

# Skips (exit 77) with the reason cluster_up.sh recorded when it could not start the cluster.
# E2E_MODE: local (the local cluster: node agents run the pods as processes) or cluster (an
# existing cluster, KUBETRAIN_TEST_KUBECONFIG with KUBETRAIN_TEST_IMAGE).
require_cluster() {
  [ -f "$E2E_STATE/skip" ] && skip "$(cat "$E2E_STATE/skip")"
  [ -f "$E2E_STATE/kcp/kubeconfig" ] || skip "no e2e cluster in $E2E_STATE (the e2e_cluster_up fixture did not run)"
  export KUBECONFIG=$E2E_STATE/kcp/kubeconfig
  K=$(cat "$E2E_STATE/kubectl")
  E2E_MODE=$(cat "$E2E_STATE/mode" 2>/dev/null || echo local)
  E2E_IMAGE=$(cat "$E2E_STATE/image" 2>/dev/null || true)
}

# require_node_agent WHAT: skips on an existing cluster, where no node agent runs the pods.
require_node_agent() {
  [ "$E2E_MODE" = local ] ||
    skip "needs the node agent's process model ($*): not on an existing cluster (KUBETRAIN_TEST_IMAGE)"
}

# k: kubectl without the client/server version-skew warning (waits for its filtered stderr).
source "$ROOT/scripts/lib-kubectl.sh"

# A fresh namespace NAME (now $NS), deleted with everything in it when the test exits.
NAMESPACES=()
use_namespace() {
  NS=$1
  k delete namespace "$NS" --ignore-not-found --wait=true --timeout=60s >/dev/null
  k create namespace "$NS" >/dev/null
  NAMESPACES+=("$NS")
  trap cleanup_namespaces EXIT
}
cleanup_namespaces() {
  local rc=$? ns
  for ns in "${NAMESPACES[@]}"; do
    k delete tj --all -n "$ns" --wait=false >/dev/null 2>&1 || true
    k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  done
  for ns in "${NAMESPACES[@]}"; do
    k wait --for=delete "namespace/$ns" --timeout=60s >/dev/null 2>&1 || true
  done
  exit $rc
}

# wait_until TIMEOUT_S DESCRIPTION COMMAND...: polls COMMAND every 0.5 s.
wait_until() {
  local timeout=$1 what=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "timed out after ${timeout}s waiting for $what"
    sleep 0.5
  done
}

# job_yaml EXAMPLE [EXTRA_ARG...]: the example with E2E_EPOCHS epochs and extra container
# args, on stdout. E2E_JOB_ARGS (words) adds args to every job, e.g. to run the suite with
# E2E_JOB_ARGS="--ps-data-plane grpc".
job_yaml() {
  local src=$1; shift
  local extra="" a
  # shellcheck disable=SC2206
  local all=("$@" ${E2E_JOB_ARGS:-})
  for a in "${all[@]}"; do extra+=", \"$a\""; done
  local edits=(-e "s|\"--epochs\", \"[0-9]*\"|\"--epochs\", \"$E2E_EPOCHS\"$extra|")
  # An existing cluster runs the image it was given.
  [ "${E2E_MODE:-local}" = local ] || edits+=(-e "s|image: kubetrain:[^ ]*|image: $E2E_IMAGE|")
  sed "${edits[@]}" "$ROOT/examples/$src"
}

# job_json EXAMPLE PYTHON [EXTRA_ARG...]: job_yaml's job as JSON, changed by the Python
# statements PYTHON, which see it as `j` (kubectl applies JSON as it does YAML).
job_json() {
  local src=$1 edit=$2; shift 2
  job_yaml "$src" "$@" | k create --dry-run=client -o json -f - |
    python3 -c 'import json,sys; j=json.load(sys.stdin); j["metadata"].pop("namespace", None); exec(sys.argv[1]); print(json.dumps(j))' "$edit"
}

# now_ms: wall time in milliseconds, for the times the tests report.
now_ms() { date +%s%3N; }

# event_message JOB REASON: the message of the job's last Event with that reason ("" if none).
event_message() {
  k get events -n "$NS" --field-selector "involvedObject.name=$1,reason=$2" \
    -o jsonpath='{.items[-1:].message}' 2>/dev/null
}

# The node agent's per-pod state (ip, netns, hostLink, pids, logs); a pod on a node added with
# local-cluster.sh add-node keeps it in that node's state.
pod_state() {  # the newest, should an earlier pod of that name have run on another node
  # shellcheck disable=SC2012
  cat "$(ls -t "$E2E_STATE"/node/pods/"${NS}_$1.json" "$E2E_STATE"/nodes/*/pods/"${NS}_$1.json" 2>/dev/null | sed -n 1p)"
}
pod_field() { pod_state "$1" | python3 -c "import json,sys; d=json.load(sys.stdin); print(eval('d' + sys.argv[1]))" "$2"; }
# A pod's log: the node agent's file of every run (local), or the current run's through the API.
pod_log() {
  if [ "${E2E_MODE:-local}" = local ]; then "$ROOT/scripts/local-cluster.sh" logs "$1" -n "$NS" "$E2E_STATE"
  else k logs -n "$NS" "$1"; fi
}

# final_accuracy POD: the last "final test_accuracy=" in its log; on an existing cluster, whose
# pods' logs go with the pods (cleanPodPolicy), the accuracy the job's status reports.
final_accuracy() {
  if [ "${E2E_MODE:-local}" = local ]; then
    pod_log "$1" | sed -n 's/.*final test_accuracy=\([0-9.]*\).*/\1/p' | tail -1
  else
    k get tj "${1%-*-*}" -n "$NS" -o jsonpath='{.status.progress.accuracy}'
  fi
}

assert_accuracy() {  # assert_accuracy POD
  local acc
  acc=$(final_accuracy "$1")
  [ -n "$acc" ] || fail "$1 logged no final accuracy"
  python3 -c "import sys; sys.exit(0 if float('$acc') >= float('$E2E_ACCURACY_BAR') else 1)" ||
    fail "$1 final accuracy $acc < $E2E_ACCURACY_BAR"
  log "$1 final test accuracy $acc (bar $E2E_ACCURACY_BAR)"
}

condition_true() {  # condition_true JOB TYPE
  [ "$(k get tj "$1" -n "$NS" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}")" = True ]
}

# wait_job JOB TIMEOUT: kubectl wait for Succeeded; fails at once if the job Failed.
wait_job() {
  local job=$1 timeout=$2 deadline=$((SECONDS + $2))
  while ! k wait --for=condition=Succeeded --timeout=5s "tj/$job" -n "$NS" >/dev/null 2>&1; do
    condition_true "$job" Failed && fail "$job failed: $(k get tj "$job" -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Failed")].message}')"
    [ $SECONDS -lt $deadline ] || fail "$job did not succeed within ${timeout}s"
  done
  log "$job Succeeded"
}

# Pods of a job still present.
job_pods() { k get pods -n "$NS" -l "kubetrain.io/job-name=$1" -o name; }

# current_step POD: the last step worker POD logged ("progress step=N/..."), 0 before any.
current_step() {
  local s
  s=$(pod_log "$1" 2>/dev/null | sed -n 's/^progress step=\([0-9]*\)\/.*/\1/p' | tail -1)
  echo "${s:-0}"
}
step_at_least() { [ "$(current_step "$1")" -ge "$2" ]; }

# record_tj_rows JOB FILE TIMEOUT: polls `kubectl get tj` (STEP LOSS ACCURACY) into FILE until
# the job ends.
record_tj_rows() {
  local job=$1 rows=$2 deadline=$((SECONDS + $3)) watch_pid
  : >"$rows"
  # `kubectl get -w` prints a row for every status write, so a short job's progress is seen
  # whatever the polling below catches.
  "$K" get tj "$job" -n "$NS" --no-headers -w 2>/dev/null >"$rows.watch" &
  watch_pid=$!
  until condition_true "$job" Succeeded || condition_true "$job" Failed; do
    [ $SECONDS -lt $deadline ] || { kill $watch_pid 2>/dev/null; fail "$job did not finish within $3 s"; }
    # NAME STATUS STEP LOSS ACCURACY [WORLD] AGE, once progress has values (WORLD: an
    # allreduce job's world size, blank for PS jobs)
    k get tj "$job" -n "$NS" --no-headers 2>/dev/null | awk 'NF == 6 || NF == 7 {print $3, $4, $5}' >>"$rows" || true
    sleep 1
  done
  kill $watch_pid 2>/dev/null || true
  wait $watch_pid 2>/dev/null || true
  awk 'NF == 6 || NF == 7 {print $3, $4, $5}' "$rows.watch" >>"$rows"
}
assert_rows_moved() {  # assert_rows_moved FILE
  local moving
  moving=$(awk '$1 > 0' "$1" | sort -u | wc -l)
  log "kubectl get tj showed $moving distinct STEP LOSS ACCURACY rows, e.g.:"
  # sed reads to the end: head would leave sort to die of SIGPIPE, which pipefail makes fatal.
  awk '$1 > 0' "$1" | sort -un | sed -n 1,4p
  [ "$moving" -ge 2 ] || fail "STEP/LOSS/ACCURACY did not move in kubectl get tj"
}
