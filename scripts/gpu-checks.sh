#!/usr/bin/env bash
# Every GPU check and benchmark of the GPU-jobs work in one run, for a GPU
# machine lent for minutes (scripts/gpu-run.sh packs this as checks.sh):
#
#   tar xzf kubetrain-gpu.tar.gz -C /tmp && /tmp/kubetrain-gpu/run.sh checks [OUT_DIR]
#
# Each step has its own timeout and its output goes to OUT_DIR (default
# $OUT, else ./gpu-checks) as NN-name.log, with a summary line per step in
# OUT_DIR/summary.txt; a failing step does not stop the others. About 8
# minutes on an H100/H200. The figures go into docs/benchmarks.md.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="${1:-${OUT:-./gpu-checks}}"
mkdir -p "$out"
run="$here/run.sh"
n=0
step() {  # step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2
  shift 2
  n=$((n + 1))
  local log
  log=$(printf '%s/%02d-%s.log' "$out" "$n" "$name")
  local t0=$SECONDS
  echo "== $name: $*" | tee "$log"
  timeout --kill-after=10 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  printf '%02d %-28s rc=%-3s %4ds  %s\n' "$n" "$name" "$rc" $((SECONDS - t0)) "$*" | tee -a "$out/summary.txt"
}
: > "$out/summary.txt"
step devices 60 "$run" devices
step nvidia-smi 30 nvidia-smi
step cuda_runtime_test 120 "$run" exec cuda_runtime_test
step gpu_parity_test 240 "$run" exec gpu_parity_test
step nccl_collective_test 240 "$run" exec nccl_collective_test
step collective_backend_test 120 "$run" exec collective_backend_test
step gpu_pod_test 120 "$run" exec gpu_pod_test
# One process: accuracy and time, the step captured and not.
step train-cnn-graph 120 "$run" train --model cnn --device cuda --epochs 5 --metrics-port 0
step train-cnn-nograph 120 "$run" train --model cnn --device cuda --epochs 5 --metrics-port 0 --cuda-graph off
step train-mlp 90 "$run" train --model mlp --device cuda --epochs 10 --metrics-port 0
# Against PyTorch eager and with its whole step in a CUDA graph.
step bench-b64-b256 300 "$run" bench --models mlp,cnn --batch-sizes 64,256
step bench-cnn-tf32 150 "$run" bench --models cnn --batch-sizes 256 --tf32
step bench-mlp-b1024 120 "$run" bench --models mlp --batch-sizes 1024
# Jobs on the one GPU against one process.
step jobs-cnn-b64 420 "$run" jobs --model cnn --batch-size 64 --epochs 3 --jobs one,ar1,ar2,ps1,ps2
step jobs-mlp-b64 240 "$run" jobs --model mlp --batch-size 64 --epochs 3 --jobs one,ar1,ar2
echo "summary: $out/summary.txt"
