#!/bin/bash
# Measured against predicted step time on shaped test hosts (docs/scaling.md).
#
# For each link rate: up the test hosts (scripts/test-hosts.sh), measure the
# link's alpha and B (bench/link_probe.py), then for each model measure one
# worker's step alone on host 0, and for each world size run the job one
# replica per host (ring: N workers; PS: K shards on hosts of their own and
# N workers) and compare worker 0's steady step time (batch / samples per
# second of its progress windows, the first left out) with what
# `kubetrain plan` predicts from those measured parameters, the hosts
# sharing this machine's cores. Prints one row per job and leaves nothing
# behind. Needs root.
#
# usage: bench/scaling.sh [--bin B] [--rates 20mbit,100mbit] [--models mlp,cnn]
#            [--sizes 2,4,8] [--algorithms ring,ps] [--shards 2] [--steps 40]
#            [--batch 64] [--wire-dtype fp32] [--mtu 1500]
# --models takes built-in names or spec files (bench/models/wide.yaml: mostly
# gradient, for the line-rate rows).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hosts_sh="$here/../scripts/test-hosts.sh"
bin=$(command -v kubetrain || true)
rates=20mbit,100mbit models=mlp,cnn sizes=2,4,8 algorithms=ring,ps shards=2 steps=40 batch=64
dtype=fp32 mtu=1500
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --rates) rates=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --algorithms) algorithms=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --wire-dtype) dtype=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "scaling: needs root (ip netns, tc)" >&2; exit 2; }
[ -x "$bin" ] || { echo "scaling: no kubetrain binary (--bin)" >&2; exit 2; }
cores=$(nproc)
prefix="ksc$(( $$ % 10000 ))"
logs=$(mktemp -d)
trap '"$hosts_sh" down --prefix "$prefix"; rm -rf "$logs"' EXIT
IFS=, read -r -a rate_list <<<"$rates"
IFS=, read -r -a model_list <<<"$models"
IFS=, read -r -a size_list <<<"$sizes"
IFS=, read -r -a algo_list <<<"$algorithms"
max=0; for n in "${size_list[@]}"; do [ "$n" -gt "$max" ] && max=$n; done
total_hosts=$((max + shards))

# Worker 0's steady step time, ms: batch / the median samples/s of its
# progress windows after the first.
steady_ms() {
  grep -E '^progress ' "$1" | sed -E 's/.* samples\/s=([0-9.]+).*/\1/' | tail -n +2 |
    sort -g | awk -v b="$batch" '{a[NR]=$1} END {if (NR == 0) {print "nan"; exit}
      m = NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.2f", 1000 * b / m}'
}

# line: the model's wire time at the measured B over the exchange time the job
# shows (its step less the model's compute): 1.0 is line rate.
printf '%-8s %-5s %-5s %3s %6s %8s %10s %10s %10s %7s %6s %6s\n' rate model algo N shards \
  compute predicted measured "exchange" error line idle
for rate in "${rate_list[@]}"; do
  "$hosts_sh" up --hosts "$total_hosts" --rate "$rate" --mtu "$mtu" --prefix "$prefix" >/dev/null
  "$hosts_sh" exec 1 --prefix "$prefix" -- python3 "$here/link_probe.py" serve 5001 &
  probe=$("$hosts_sh" exec 0 --prefix "$prefix" -- python3 "$here/link_probe.py" probe \
    "$("$hosts_sh" addr 1 --prefix "$prefix")" 5001 --bytes 8000000)
  wait
  alpha=$(sed -E 's/.*alpha_us=([0-9.]+).*/\1/' <<<"$probe")
  bps=$(sed -E 's/.*bytes_per_second=([0-9.]+).*/\1/' <<<"$probe")
  link_kbit=$(awk -v b="$bps" 'BEGIN {printf "%.0f", b * 8 / 1000}')
  echo "# $rate, MTU $mtu: alpha ${alpha} us, B $(awk -v b="$bps" 'BEGIN {printf "%.2f", b / 1e6}') MB/s payload" >&2
  for model in "${model_list[@]}"; do
    # One worker alone on host 0: the compute the model starts from.
    "$hosts_sh" exec 0 --prefix "$prefix" -- "$bin" train --model "$model" --epochs 1 \
      --train-limit $((batch * (steps + 10))) --batch-size "$batch" --threads 1 --log-every 5 \
      --eval-every-epoch 0 --metrics-port 0 >"$logs/alone.log" 2>&1
    compute=$(steady_ms "$logs/alone.log")
    for algo in "${algo_list[@]}"; do
      for n in "${size_list[@]}"; do
        k=0 args=()
        if [ "$algo" = ps ]; then k=$shards; args=(--ps "$k"); fi
        # Each worker gets (steps + 10) batches of its own.
        dir="$logs/$rate-$model-$algo-$n"
        set +e
        out=$("$hosts_sh" job --prefix "$prefix" "${args[@]}" --workers "$n" --bin "$bin" \
          --logs "$dir" --timeout 900 -- --model "$model" --epochs 1 \
          --train-limit $((n * batch * (steps + 10))) --batch-size "$batch" --threads 1 \
          --log-every 5 --eval-every-epoch 0 --metrics-port 0 --wire-dtype "$dtype" 2>&1)
        rc=$?
        set -e
        if [ $rc -ne 0 ]; then echo "scaling: $algo N=$n failed:" >&2; echo "$out" >&2; exit 1; fi
        idle=$(sed -nE 's/^cpu idle during the job: ([0-9]+) %.*/\1/p' <<<"$out")
        measured=$(steady_ms "$dir/worker-0.log")
        pred=$("$bin" plan --model "$model" --step-ms "$compute" --workers "$n" \
          --algorithms "$algo" --ps-shards "$shards" --link "${link_kbit}kbit" \
          --alpha-us "$alpha" --bucket-mb 25 --wire-dtype "$dtype" --shared-cores "$cores" \
          --format csv | tail -1)
        IFS=, read -r _ _ _ _ _ comp _ exch _ step _ <<<"$pred"
        err=$(awk -v p="$step" -v m="$measured" 'BEGIN {printf "%+.1f%%", 100 * (m - p) / p}')
        line=$(awk -v e="$exch" -v m="$measured" -v c="$comp" 'BEGIN {printf "%.2f", e / (m - c)}')
        printf '%-8s %-5s %-5s %3d %6d %8s %10s %10s %10s %7s %6s %5s%%\n' "$rate" \
          "$(basename "$model" .yaml)" "$algo" "$n" "$k" "$compute" "$step" "$measured" "$exch" \
          "$err" "$line" "$idle"
      done
    done
  done
  "$hosts_sh" down --prefix "$prefix"
done
