#!/bin/bash
# scripts/test-hosts.sh end to end (CTest label netns): 4 hosts on a shaped
# 100 Mbit/s bridge; a 4-worker allreduce ring and a 2-shard PS job placed one
# replica per host train Fashion-MNIST; every replica must end with the same
# parameters (the same "final parameters crc32c=" line) and worker 0 above an
# accuracy bar. Correctness only: speed is bench/ and docs/scaling.md's
# business. Skips (77) without root, ip, tc or the tbf qdisc; deletes its
# namespaces whatever happens.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script="$here/../../scripts/test-hosts.sh"
bin=${KUBETRAIN_BIN:?KUBETRAIN_BIN: the kubetrain binary}
data=${KUBETRAIN_DATA:-/usr/share/datasets/fashion-mnist}

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root for ip netns and tc"
command -v ip >/dev/null || skip "no ip (iproute2)"
command -v tc >/dev/null || skip "no tc (iproute2)"
ls "$data"/train-images-idx3-ubyte* >/dev/null 2>&1 || skip "no Fashion-MNIST in $data"
probe="ktp$(( $$ % 100000 ))"
ip netns add "$probe" || skip "cannot create a network namespace"
trap 'ip netns del "$probe" 2>/dev/null || true' EXIT
ip -n "$probe" link add kta type veth peer name ktb || { ip netns del "$probe"; skip "cannot create a veth pair"; }
if ! tc -n "$probe" qdisc add dev kta root tbf rate 100mbit burst 16kb latency 50ms 2>/dev/null; then
  ip netns del "$probe"; skip "the kernel has no tbf qdisc (sch_tbf)"
fi
ip netns del "$probe"

prefix="ktt$(( $$ % 100000 ))"
logs=$(mktemp -d)
trap '"$script" down --prefix "$prefix"; rm -rf "$logs"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Bad input is refused before anything is made.
if out=$("$script" up --hosts 2 --rate 5parsecs --prefix "$prefix" 2>&1); then fail "a bad rate was taken"; fi
grep -q 'kbit, mbit or gbit' <<<"$out" || fail "bad rate: unclear error: $out"
[ -z "$(ip netns list | grep "^$prefix-" || true)" ] || fail "a refused up left namespaces"
if out=$("$script" job --workers 2 --prefix "$prefix" --bin "$bin" -- --epochs 1 2>&1); then
  fail "a job ran without hosts"
fi
grep -q "run up --hosts 2 first" <<<"$out" || fail "job without hosts: unclear error: $out"

"$script" up --hosts 4 --rate 100mbit --prefix "$prefix"
for i in 0 1 2 3; do
  tc -n "$prefix-$i" qdisc show dev eth0 | grep -q 'tbf.*rate 100Mbit' || fail "host $i's eth0 is not shaped"
  tc -n "$prefix-br" qdisc show dev "p$i" | grep -q 'tbf.*rate 100Mbit' || fail "host $i's bridge port is not shaped"
done
a0=$("$script" addr 0 --prefix "$prefix") a3=$("$script" addr 3 --prefix "$prefix")
"$script" exec 0 --prefix "$prefix" -- ip -4 addr show dev eth0 | grep -q "inet $a0/" || fail "host 0 lacks $a0"
[ "$a0" != "$a3" ] || fail "hosts share an address"

train=(--data "$data" --model mlp --epochs 2 --train-limit 4096 --threads 1 --log-every 0
       --metrics-port 0)
check_job() {  # check_job NAME WORKERS: same parameters everywhere, accuracy bar on worker 0
  local name=$1 workers=$2 crcs acc
  crcs=$(grep -h 'final parameters crc32c=' "$logs/$name"/worker-*.log | sed -E 's/.*crc32c=([0-9a-f]+).*/\1/')
  [ "$(wc -l <<<"$crcs")" -eq "$workers" ] || fail "$name: $(wc -l <<<"$crcs") of $workers workers printed their parameters"
  [ "$(sort -u <<<"$crcs" | wc -l)" -eq 1 ] || fail "$name: the workers ended with different parameters: $crcs"
  acc=$(grep -h '^final ' "$logs/$name/worker-0.log" | sed -E 's/.*test_accuracy=([0-9.]+).*/\1/')
  awk -v a="$acc" 'BEGIN {exit !(a >= 0.65)}' || fail "$name: test accuracy $acc below 0.65"
  echo "$name: $workers workers agree on crc32c=$(head -1 <<<"$crcs"), test accuracy $acc"
}

"$script" job --prefix "$prefix" --workers 4 --bin "$bin" --logs "$logs/ring" --timeout 240 -- "${train[@]}" \
  || fail "the 4-host ring failed"
check_job ring 4
"$script" job --prefix "$prefix" --ps 2 --workers 2 --bin "$bin" --logs "$logs/ps" --timeout 240 -- \
  "${train[@]}" --exchange-mode sync || fail "the 2-shard PS job failed"
check_job ps 2
grep -q 'every worker finished' "$logs/ps/ps-0.log" || fail "ps-0 did not see every worker finish"

"$script" down --prefix "$prefix"
[ -z "$(ip netns list | grep -E "^$prefix-" || true)" ] || fail "down left namespaces behind"
echo "PASS"
