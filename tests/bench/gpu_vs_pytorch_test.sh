#!/usr/bin/env bash
# bench/gpu_vs_pytorch.py on the CPU: it refuses bad arguments with one
# line, skips --device cuda without a GPU-enabled PyTorch, and measures the
# kubetrain side (a row of the documented seven columns with a positive
# samples/s; the CUDA-graph columns are `-` on the CPU), also at a batch size
# whose warm-up and timed steps need more than one epoch.
# Usage: gpu_vs_pytorch_test.sh KUBETRAIN_BIN [repository root]
set -euo pipefail
bin="$1"
root="${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
script="$root/bench/gpu_vs_pytorch.py"
fail() { echo "FAIL: $*"; exit 1; }

out=$(python3 "$script" --kubetrain "$bin" --models foo 2>&1) && fail "accepted --models foo"
grep -q "unknown model 'foo'" <<<"$out" || fail "no reason for --models foo: $out"
out=$(python3 "$script" --kubetrain "$bin" --batch-sizes 0 2>&1) && fail "accepted batch 0"
grep -q "must be positive" <<<"$out" || fail "no reason for --batch-sizes 0: $out"
out=$(python3 "$script" --kubetrain /nonexistent 2>&1) && fail "accepted a missing binary"
out=$(python3 "$script" --kubetrain "$bin" --timeout 0 2>&1) && fail "accepted --timeout 0"
grep -q -- "--timeout must be positive" <<<"$out" || fail "no reason for --timeout 0: $out"

if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  out=$(python3 "$script" --kubetrain "$bin")
  grep -q "^skipped: " <<<"$out" || fail "--device cuda without a GPU did not skip: $out"
fi

out=$(python3 "$script" --kubetrain "$bin" --device cpu --models mlp --batch-sizes 32 \
      --steps 10 --warmup 2)
header='model batch kubetrain_samples_s torch_samples_s ratio torch_graph_samples_s ratio_graph'
grep -qx "$header" <<<"$out" || fail "no header '$header': $out"
row=$(grep '^mlp 32 ' <<<"$out") || fail "no mlp row: $out"
# 7 columns; a positive kubetrain rate; the torch columns numbers or `-`
# (PyTorch may be missing here); the CUDA-graph columns `-` on the CPU.
awk '{ exit !(NF == 7 && $3 > 0 && $6 == "-" && $7 == "-" &&
              ($4 == "-" ? $5 == "-" : ($4 > 0 && $5 > 0))) }' <<<"$row" \
  || fail "mlp row is not 'model batch kt torch ratio - -': $row"
echo "PASS: $row"

# 44 steps of 4096 are more than Fashion-MNIST's 60000 samples: kubetrain must
# run several epochs (4 of 11 steps) to print 2+ progress lines (one every 8).
out=$(python3 "$script" --kubetrain "$bin" --device cpu --models mlp --batch-sizes 4096 \
      --steps 40 --warmup 4)
row=$(grep '^mlp 4096 ' <<<"$out") || fail "no mlp 4096 row: $out"
awk '{ exit !(NF == 7 && $3 > 0) }' <<<"$row" || fail "mlp 4096 row: $row"
echo "PASS: $row"
