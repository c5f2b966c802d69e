#!/usr/bin/env bash
# bench/gpu_jobs.py on the CPU: it refuses bad arguments with a reason, skips
# --device cuda without a GPU, and runs one process, a 1-worker allreduce job
# and a 1-PS 1-worker job, printing a row of the documented seven columns
# with a positive samples/s and ratio for each, and the command lines.
# Usage: gpu_jobs_test.sh KUBETRAIN_BIN [repository root]
set -euo pipefail
bin="$1"
root="${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
script="$root/bench/gpu_jobs.py"
fail() { echo "FAIL: $*"; exit 1; }

out=$(python3 "$script" --kubetrain "$bin" --device cpu --jobs one,xx 2>&1) && fail "accepted job xx"
grep -q "unknown job 'xx'" <<<"$out" || fail "no reason for --jobs one,xx: $out"
out=$(python3 "$script" --kubetrain "$bin" --device cpu --model xyz 2>&1) && fail "accepted --model xyz"
grep -q "invalid choice: 'xyz'" <<<"$out" || fail "no reason for --model xyz: $out"
out=$(python3 "$script" --kubetrain "$bin" --device cpu --repeat 0 2>&1) && fail "accepted --repeat 0"
grep -q -- "--repeat must be positive" <<<"$out" || fail "no reason for --repeat 0: $out"
out=$(python3 "$script" --kubetrain /nonexistent 2>&1) && fail "accepted a missing binary"
grep -q "is not an executable" <<<"$out" || fail "no reason for a missing binary: $out"

if ! "$bin" devices | grep '^cuda:' >/dev/null; then
  out=$(python3 "$script" --kubetrain "$bin")
  grep -q "^skipped: " <<<"$out" || fail "--device cuda without a GPU did not skip: $out"
fi

# A failing job: exit 1, its log's tail on stderr.
out=$(python3 "$script" --kubetrain "$bin" --device cpu --model mlp --jobs ar1 \
      --extra-args=--no-such-flag 2>&1) && fail "a failing job exited 0: $out"
grep -q "job ar1 exited with code" <<<"$out" || fail "no failure line: $out"
grep -q "no-such-flag" <<<"$out" || fail "no log tail of the failed job: $out"

# 6000 samples, a progress line every 20 steps: a few seconds per job.
out=$(python3 "$script" --kubetrain "$bin" --device cpu --model mlp --epochs 1 \
      --jobs one,ar1,ps1 --extra-args "--train-limit 6000 --log-every 20 --threads 1")
header='# job workers samples_s ratio_vs_one exchange_first exchange_last test_acc'
grep -qxF "$header" <<<"$out" || fail "no header '$header': $out"
rows=$(grep -v '^#' <<<"$out")
[[ $(wc -l <<<"$rows") == 3 ]] || fail "expected 3 rows: $out"
for job in one ar1 ps1; do
  row=$(grep "^$job " <<<"$rows") || fail "no $job row: $out"
  # job, 1 worker, samples/s > 0, ratio > 0, exchange shares in [0, 1], test accuracy in (0, 1].
  awk '{ num = "^[0-9]+([.][0-9]+)?$"
         exit !(NF == 7 && $2 == 1 && $3 ~ num && $3 > 0 && $4 ~ num && $4 > 0 &&
                $5 ~ num && $5 <= 1 && $6 ~ num && $6 <= 1 && $7 ~ num && $7 > 0 && $7 <= 1) }' \
    <<<"$row" || fail "bad $job row: $row"
  grep -q "^# $job: " <<<"$out" || fail "no command line for $job: $out"
done
grep -q "^# one: .* train --model mlp --device cpu .*--metrics-port 0" <<<"$out" \
  || fail "one's command line: $out"
grep -q "^#   PS x1: .*--exchange-mode sync" <<<"$out" || fail "ps1's PS command line: $out"
echo "PASS:"
echo "$out"
