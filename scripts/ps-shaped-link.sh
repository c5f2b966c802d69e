#!/bin/bash
# PS training over a rate-limited link, to measure exchange changes where the
# network, not the CPU, is the bottleneck (loopback on 2 cores is CPU-bound).
#
# Two network namespaces joined by a veth pair, each end shaped to --rate by
# tbf (so each direction of the link carries --rate, as a full-duplex NIC
# does): the PS shards listen in one (10.77.0.1), the workers train in the
# other (10.77.0.2) and share its link. Each binary given trains the same
# sync job in turn, --runs times, interleaved; the script prints every run's
# final line and each binary's median training time against the first's.
#
# usage: scripts/ps-shaped-link.sh [--rate 200mbit] [--burst 256kb] [--shards 2]
#            [--workers 1] [--samples 12800] [--runs 2] BINARY [BINARY...] [-- TRAIN ARGS...]
# --burst is tbf's bucket: bytes a direction idle long enough may send at
# once. A real NIC banks nothing; a bucket near a step's bytes lets each
# direction refill while the other is busy, as if the two overlapped.
# Needs root (ip netns, tc) and sch_tbf; leaves nothing behind on exit.
set -euo pipefail

rate=200mbit burst=256kb shards=2 workers=1 samples=12800 runs=2
bins=() extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --burst) burst=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) bins+=("$1"); shift ;;
  esac
done
[ ${#bins[@]} -ge 1 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "ps-shaped-link: needs root for ip netns and tc" >&2; exit 2; }

ns_ps=ktshape-ps ns_w=ktshape-w
logs=$(mktemp -d)
cleanup() {
  for ns in $ns_ps $ns_w; do
    ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null || true
  done
  sleep 0.3
  ip netns del $ns_ps 2>/dev/null || true
  ip netns del $ns_w 2>/dev/null || true
}
trap 'cleanup; rm -rf "$logs"' EXIT
cleanup
ip netns add $ns_ps
ip netns add $ns_w
ip link add ktshape0 type veth peer name ktshape1
ip link set ktshape0 netns $ns_ps
ip link set ktshape1 netns $ns_w
ip -n $ns_ps addr add 10.77.0.1/24 dev ktshape0
ip -n $ns_w addr add 10.77.0.2/24 dev ktshape1
for ns in $ns_ps $ns_w; do ip -n $ns link set lo up; done
ip -n $ns_ps link set ktshape0 up
ip -n $ns_w link set ktshape1 up
ip netns exec $ns_ps tc qdisc add dev ktshape0 root tbf rate "$rate" burst "$burst" latency 50ms
ip netns exec $ns_w tc qdisc add dev ktshape1 root tbf rate "$rate" burst "$burst" latency 50ms

ps_hosts="" worker_hosts=""
for i in $(seq 0 $((shards - 1))); do ps_hosts+="\"10.77.0.1:$((2300 + i))\","; done
for i in $(seq 0 $((workers - 1))); do worker_hosts+="\"10.77.0.2:$((2400 + i))\","; done
cluster="{\"ps\":[${ps_hosts%,}],\"worker\":[${worker_hosts%,}]}"
args=(train --model mlp --epochs 1 --train-limit "$samples" --exchange-mode sync)

# One job with binary $1; prints the training seconds of worker 0.
run_job() {
  local bin=$1 tag=$2 pids=()
  for i in $(seq 0 $((shards - 1))); do
    TF_CONFIG="{\"cluster\":$cluster,\"task\":{\"type\":\"ps\",\"index\":$i}}" \
      KUBETRAIN_JOB_TOKEN=shaped ip netns exec $ns_ps "$bin" "${args[@]}" \
      >"$logs/$tag-ps$i.log" 2>&1 &
  done
  for i in $(seq 0 $((workers - 1))); do
    TF_CONFIG="{\"cluster\":$cluster,\"task\":{\"type\":\"worker\",\"index\":$i}}" \
      KUBETRAIN_JOB_TOKEN=shaped timeout 600 ip netns exec $ns_w "$bin" "${args[@]}" \
      --threads 1 "${extra[@]}" >"$logs/$tag-w$i.log" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  # The shards end once every worker is done; give them 15 s.
  for _ in $(seq 1 150); do
    [ -z "$(ip netns pids $ns_ps 2>/dev/null)" ] && break
    sleep 0.1
  done
  ip netns pids $ns_ps 2>/dev/null | xargs -r kill 2>/dev/null || true
  wait || true
  local line
  line=$(grep -E '\bfinal\b' "$logs/$tag-w0.log" | tail -1 || true)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "ps-shaped-link: $bin failed (rc=$rc); worker-0's log:" >&2
    tail -5 "$logs/$tag-w0.log" >&2
    exit 1
  fi
  echo "  $bin: $line" >&2
  sed -E 's/.* time=([0-9.]+)s.*/\1/' <<<"$line"
}

echo "ps-shaped-link: $shards shard(s), $workers worker(s), $rate each way (burst $burst), $samples samples, sync"
declare -A times
for r in $(seq 1 "$runs"); do
  echo "run $r" >&2
  for b in "${!bins[@]}"; do
    times[$b]+="$(run_job "${bins[$b]}" "r$r-b$b") "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
base=$(median <<<"${times[0]}")
printf '%-50s %10s %8s\n' binary median_s vs_first
for b in "${!bins[@]}"; do
  m=$(median <<<"${times[$b]}")
  printf '%-50s %10s %8.2f\n' "${bins[$b]}" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')"
done
