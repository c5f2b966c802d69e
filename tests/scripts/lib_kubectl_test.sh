#!/bin/bash
# scripts/lib-kubectl.sh: k passes kubectl's stdout and exit status through, drops the
# version-skew warning from stderr, keeps the rest, and has written all of it when it returns.
# The last is what e2e_kubectl_logs_test needs (k logs --previous 2>FILE, then grep FILE): the
# process-substitution filter k used to be wrote FILE late: this test's loop then found the
# file without the line in 23 of its 300 runs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/scripts/lib-kubectl.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "ok: $1"; else echo "FAIL: $1: want '$2', got '$3'"; fails=$((fails + 1)); fi
}

# A kubectl that answers at once (sh, not bash: the race is widest when it is fast).
cat >"$T/kubectl" <<'SH'
#!/bin/sh
echo "out: $*"
echo "WARNING: version difference between client (1.31) and server (1.20) exceeds the supported minor version skew of +/-1" >&2
echo "Error from server (BadRequest): the error" >&2
exit 3
SH
printf '#!/bin/sh\necho "quiet: $*"\n' >"$T/quiet"
chmod +x "$T/kubectl" "$T/quiet"

K=$T/kubectl
rc=0
k get pods -n ns >"$T/out" 2>"$T/err" || rc=$?
check "exit status is kubectl's" 3 "$rc"
check "stdout passes through" "out: get pods -n ns" "$(cat "$T/out")"
check "the version-skew warning is dropped, the rest kept" \
  "Error from server (BadRequest): the error" "$(cat "$T/err")"

# set -euo pipefail: a kubectl that succeeds with nothing on stderr is a success.
K=$T/quiet
check "a quiet success captured" "quiet: version" "$(k version)"
k version >/dev/null
echo "ok: a quiet success does not end a set -e script"

# stderr is complete when k returns: read at once, 300 times.
K=$T/kubectl
late=0
for _ in $(seq 1 300); do
  k logs pod --previous >/dev/null 2>"$T/err" || true
  line=""
  read -r line <"$T/err" || true
  [ "$line" = "Error from server (BadRequest): the error" ] || late=$((late + 1))
done
check "stderr written before k returns (300 runs, late ones)" 0 "$late"

[ "$fails" = 0 ] || { echo "$fails checks failed"; exit 1; }
echo "all checks passed"
