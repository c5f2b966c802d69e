#!/bin/bash
# Test hosts on shaped links: N network namespaces ("hosts") on one bridge,
# each host's link shaped like a NIC, and a job's replicas placed one per
# host, so an exchange is measured where a cluster's limit is, the network,
# not the 2 cores of a loopback run.
#
#   scripts/test-hosts.sh up   --hosts N [--rate 1gbit] [--delay 100us] [--mtu 1500]
#                              [--prefix kth]
#   scripts/test-hosts.sh down [--prefix kth]
#   scripts/test-hosts.sh addr I [--prefix kth]          host I's address
#   scripts/test-hosts.sh exec I [--prefix kth] -- CMD...  run CMD on host I
#   scripts/test-hosts.sh job  [--prefix kth] [--ps K] --workers W [--bin B]
#                              [--logs DIR] [--timeout S] -- TRAIN ARGS...
#
# Layout: the bridge lives in a namespace of its own (PREFIX-br), so the
# machine's own network is never touched; host I is namespace PREFIX-I with
# eth0 = 10.81.S.(I+1)/24 (S from the prefix, so two sets of hosts can stand
# side by side) joined to the bridge by a veth pair. Each direction of each
# host's link is shaped to --rate by tbf (the host end shapes what it sends,
# the bridge end what it receives: a full-duplex NIC), with a bucket of 1 ms
# of traffic (a NIC banks nothing). --delay adds netem delay on what a host
# sends (one-way host-to-host latency = delay); kernels without sch_netem
# refuse it with a clear error (this machine's does). --mtu sets every link's
# MTU (9000: jumbo frames, as many cluster networks use; tbf counts headers,
# so the payload share of the rate is 1448/1514 at 1500 and 8948/9014 at 9000).
#
# `job` places PS shards on hosts 0..K-1 and workers (then the chief-less
# allreduce ring when K is 0) on hosts K..K+W-1, every replica on the default
# port 2222 of its own host, with a TF_CONFIG each and KUBETRAIN_JOB_TOKEN set;
# it waits for the workers, then the shards, and prints each replica's final
# line, and the machine's CPU idle share during the job (from /proc/stat),
# warning when under 25 %: then the CPU, not the link, may be the bound. It
# exits non-zero when a replica failed, printing that replica's log tail.
#
# Needs root (ip netns, tc) and sch_tbf. `down` (also run by `up` first)
# kills what runs on the hosts and deletes every namespace of the prefix.
set -euo pipefail

usage() { sed -n '2,13p' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
cmd=$1; shift

prefix=kth hosts=0 rate=1gbit delay="" mtu=1500 ps=0 workers=0 bin="" logs="" timeout=600 index=""
rest=()
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --ps) ps=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --) shift; rest=("$@"); break ;;
    -*) echo "test-hosts: unknown option $1" >&2; exit 2 ;;
    *) if [ -z "$index" ]; then index=$1; shift; else echo "test-hosts: unexpected $1" >&2; exit 2; fi ;;
  esac
done
[[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] || { echo "test-hosts: --prefix must be 1-8 of [a-z0-9], starting with a letter" >&2; exit 2; }

need_root() {
  [ "$(id -u)" = 0 ] || { echo "test-hosts: needs root for ip netns and tc" >&2; exit 2; }
}

# The third octet of the prefix's subnet: a checksum of the name, 1-250.
subnet() { echo "10.81.$(( $(cksum <<<"$prefix" | cut -d' ' -f1) % 250 + 1 ))"; }
addr_of() { echo "$(subnet).$(( $1 + 1 ))"; }

# Bytes per second of a tc rate ("100mbit", "1gbit", "500kbit").
rate_bytes() {
  local r=${1,,} n unit
  n=${r%%[a-z]*}; unit=${r#"$n"}
  case "$unit" in
    gbit) echo $(( n * 125000000 )) ;;
    mbit) echo $(( n * 125000 )) ;;
    kbit) echo $(( n * 125 )) ;;
    bit | "") echo $(( n / 8 )) ;;
    *) echo "test-hosts: --rate takes kbit, mbit or gbit, not '$1'" >&2; exit 2 ;;
  esac
}

namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}-(br|[0-9]+)$" || true; }

down() {
  local ns
  for ns in $(namespaces); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
  done
  for ns in $(namespaces); do
    for _ in $(seq 1 30); do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
      sleep 0.1
    done
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}

shape() {  # shape NS DEV: tbf at --rate, netem --delay first when given
  local ns=$1 dev=$2 bytes burst parent=root
  bytes=$(rate_bytes "$rate")
  burst=$(( bytes / 1000 )); [ $burst -ge 16384 ] || burst=16384
  if [ -n "$delay" ]; then
    if ! tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000 2>/dev/null; then
      echo "test-hosts: --delay needs sch_netem, which this kernel ($(uname -r)) lacks; leave --delay out" >&2
      return 1
    fi
    parent="parent 1:"
  fi
  # shellcheck disable=SC2086
  tc -n "$ns" qdisc add dev "$dev" $parent handle 2: tbf rate "$rate" burst "$burst" latency 50ms
}

up() {
  need_root
  [ "$hosts" -ge 1 ] && [ "$hosts" -le 64 ] || { echo "test-hosts: --hosts must be 1-64" >&2; exit 2; }
  [[ "$mtu" =~ ^[0-9]+$ ]] && [ "$mtu" -ge 576 ] && [ "$mtu" -le 65535 ] ||
    { echo "test-hosts: --mtu must be 576-65535" >&2; exit 2; }
  rate_bytes "$rate" >/dev/null
  down
  local br="${prefix}-br" i ns
  ip netns add "$br"
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 mtu "$mtu" up
  for i in $(seq 0 $((hosts - 1))); do
    ns="${prefix}-$i"
    ip netns add "$ns"
    ip -n "$br" link add "p$i" type veth peer name eth0 netns "$ns"
    ip -n "$br" link set "p$i" mtu "$mtu" master br0 up
    ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 mtu "$mtu" up
    shape "$ns" eth0 || { down; exit 1; }
    shape "$br" "p$i" || { down; exit 1; }
  done
  echo "test-hosts: $hosts host(s) ${prefix}-0..$((hosts - 1)) on $(subnet).0/24, $rate each way${delay:+, $delay one-way}, MTU $mtu"
}

cpu_ticks() { awk '/^cpu / {print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }

job() {
  need_root
  [ "$workers" -ge 1 ] || { echo "test-hosts: job needs --workers" >&2; exit 2; }
  [ ${#rest[@]} -ge 1 ] || { echo "test-hosts: job needs -- and the train arguments" >&2; exit 2; }
  local total=$((ps + workers)) i
  for i in $(seq 0 $((total - 1))); do
    ip netns list | grep -qE "^${prefix}-$i( |$)" || {
      echo "test-hosts: host ${prefix}-$i is missing: run up --hosts $total first" >&2; exit 2; }
  done
  [ -n "$bin" ] || bin=$(command -v kubetrain || true)
  [ -x "$bin" ] || { echo "test-hosts: no kubetrain binary (--bin)" >&2; exit 2; }
  local own_logs=""
  [ -n "$logs" ] || { logs=$(mktemp -d); own_logs=$logs; }
  mkdir -p "$logs"
  local ps_hosts="" worker_hosts=""
  for i in $(seq 0 $((ps - 1))); do ps_hosts+="\"$(addr_of "$i"):2222\","; done
  for i in $(seq 0 $((workers - 1))); do worker_hosts+="\"$(addr_of $((ps + i))):2222\","; done
  local cluster="{\"worker\":[${worker_hosts%,}]"
  [ "$ps" -eq 0 ] || cluster+=",\"ps\":[${ps_hosts%,}]"
  cluster+="}"
  local token="test-hosts-$$" wpids=() spids=() names=() rc=0 t0 t1
  read -r -a t0 <<<"$(cpu_ticks)"
  for i in $(seq 0 $((ps - 1))); do
    TF_CONFIG="{\"cluster\":$cluster,\"task\":{\"type\":\"ps\",\"index\":$i}}" \
      KUBETRAIN_JOB_TOKEN=$token timeout "$timeout" ip netns exec "${prefix}-$i" "$bin" train \
      "${rest[@]}" >"$logs/ps-$i.log" 2>&1 &
    spids+=($!)
  done
  for i in $(seq 0 $((workers - 1))); do
    TF_CONFIG="{\"cluster\":$cluster,\"task\":{\"type\":\"worker\",\"index\":$i}}" \
      KUBETRAIN_JOB_TOKEN=$token timeout "$timeout" ip netns exec "${prefix}-$((ps + i))" "$bin" \
      train "${rest[@]}" >"$logs/worker-$i.log" 2>&1 &
    wpids+=($!); names+=("worker-$i")
  done
  for i in "${!wpids[@]}"; do
    if ! wait "${wpids[$i]}"; then
      rc=1; echo "test-hosts: ${names[$i]} failed; its log ends:" >&2; tail -5 "$logs/${names[$i]}.log" >&2
    fi
  done
  for i in "${!spids[@]}"; do
    if ! wait "${spids[$i]}"; then
      rc=1; echo "test-hosts: ps-$i failed; its log ends:" >&2; tail -5 "$logs/ps-$i.log" >&2
    fi
  done
  read -r -a t1 <<<"$(cpu_ticks)"
  for i in $(seq 0 $((workers - 1))); do
    echo "worker-$i: $(grep -E '(^| )final ' "$logs/worker-$i.log" | tail -1 || true)"
  done
  local idle
  idle=$(awk -v i=$((t1[0] - t0[0])) -v t=$((t1[1] - t0[1])) 'BEGIN {printf "%.0f", t ? 100 * i / t : 0}')
  echo "cpu idle during the job: ${idle} %"
  [ "$idle" -ge 25 ] || echo "test-hosts: warning: the CPU was busy (idle ${idle} % < 25 %): the link may not be the bound" >&2
  [ -z "$own_logs" ] || rm -rf "$own_logs"
  return $rc
}

case "$cmd" in
  up) up ;;
  down) need_root; down ;;
  addr) [ -n "$index" ] || usage; addr_of "$index" ;;
  exec)
    need_root; [ -n "$index" ] && [ ${#rest[@]} -ge 1 ] || usage
    exec ip netns exec "${prefix}-$index" "${rest[@]}" ;;
  job) job ;;
  *) usage ;;
esac
