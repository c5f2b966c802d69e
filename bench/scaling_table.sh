#!/bin/bash
# The predictions table of docs/scaling.md: `kubetrain plan` for the built-in
# models and for ResNet-50 and BERT-large gradient sizes, at 8, 64 and 256
# GPUs (8 per pod), 25 and 100 Gbit/s, fp32 and fp16, ring and PS with the
# recommended shard count; latency 25 us (TCP). One GPU's step time alone:
# mlp and cnn measured on an H200 (2026-11-27, bench/gpu_vs_pytorch.py,
# kubetrain's samples/s at batch 64 and 256: step = batch / samples/s);
# ResNet-50 and BERT-large are assumptions (the models are not built in;
# docs/scaling.md says where each figure comes from).
#
# usage: bench/scaling_table.sh [KUBETRAIN_BINARY]
set -euo pipefail
bin=${1:-$(command -v kubetrain)}
# name | --model or --params | step ms alone (one GPU): measured (mlp, cnn), assumed (the rest)
models=(
  "mlp (batch 64)|--model mlp|0.0617"
  "mlp (batch 256)|--model mlp|0.123"
  "cnn (batch 64)|--model cnn|0.341"
  "cnn (batch 256)|--model cnn|1.07"
  "ResNet-50 (25.6 M, batch 256)|--params 25600000|80"
  "BERT-large (340 M, batch 32x512)|--params 340000000|300"
)
echo "| model | link | wire | GPUs (pods) | ring | ring bucket | PS k=1 | PS, best k | PS pipelined, best k |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|"
for m in "${models[@]}"; do
  IFS='|' read -r name flag ms <<<"$m"
  for link in 25gbit 100gbit; do
    for dtype in fp32 fp16; do
      # shellcheck disable=SC2086
      csv=$("$bin" plan $flag --step-ms "$ms" --workers 8,64,256 --gpus-per-pod 8 --link "$link" \
        --alpha-us 25 --wire-dtype "$dtype" --format csv | tail -n +2)
      # shellcheck disable=SC2086
      piped=$("$bin" plan $flag --step-ms "$ms" --workers 8,64,256 --gpus-per-pod 8 --link "$link" \
        --alpha-us 25 --wire-dtype "$dtype" --algorithms ps --ps-pipeline --format csv | tail -n +2)
      for n in 8 64 256; do
        ring=$(awk -F, -v n=$n '$1 == n && $3 == "ring" {printf "%.0f %%", 100 * $11}' <<<"$csv")
        bucket=$(awk -F, -v n=$n '$1 == n && $3 == "ring" {printf ($5 >= 10 ? "%.0f MiB" : "%.2g MiB"), $5}' <<<"$csv")
        ps1=$(awk -F, -v n=$n '$1 == n && $3 == "ps" && $4 == 1 {printf "%.0f %%", 100 * $11}' <<<"$csv")
        best=$(awk -F, -v n=$n '$1 == n && $3 == "ps" {k = $4; e = $11} END {printf "%d, %.0f %%", k, 100 * e}' \
          <<<"$(grep -E "^$n," <<<"$csv")")
        pbest=$(awk -F, -v n=$n '$1 == n && $3 == "ps" {k = $4; e = $11} END {printf "%.0f %% (k=%d)", 100 * e, k}' \
          <<<"$(grep -E "^$n," <<<"$piped")")
        best=$(awk -F, '{printf "%s %% (k=%s)", $2, $1}' <<<"$(sed -E 's/^([0-9]+), ([0-9]+) %$/\1,\2/' <<<"$best")")
        echo "| $name | ${link%bit}b/s | $dtype | $n ($((n / 8))) | $ring | $bucket | $ps1 | $best | $pbest |"
      done
    done
  done
done
