#!/usr/bin/env bash
# bench/gpu_vs_pytorch.py on the CPU: it refuses bad arguments with one
# line, skips --device cuda without a GPU-enabled PyTorch, and measures the
# kubetrain side (a row with a positive samples/s).
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

if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  out=$(python3 "$script" --kubetrain "$bin")
  grep -q "^skipped: " <<<"$out" || fail "--device cuda without a GPU did not skip: $out"
fi

out=$(python3 "$script" --kubetrain "$bin" --device cpu --models mlp --batch-sizes 32 \
      --steps 10 --warmup 2)
row=$(grep '^mlp 32 ' <<<"$out") || fail "no mlp row: $out"
rate=$(awk '{print $3}' <<<"$row")
awk -v r="$rate" 'BEGIN { exit !(r > 0) }' || fail "kubetrain samples/s is '$rate': $out"
echo "PASS: $row"
