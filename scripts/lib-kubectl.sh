# Sourced: k runs kubectl ($K) with its client/server version-skew warning dropped from stderr.
# The filter is a pipe that k waits for, not a process substitution: a caller that runs
# `k ... 2>FILE` and reads FILE next sees all of kubectl's stderr. (A `2> >(grep ...)` filter
# wrote it after k had returned: e2e_kubectl_logs_test read an empty file once in CI.)
# Returns kubectl's exit status; stdout passes through untouched.
k() {
  { "$K" "$@" 2>&1 1>&3 3>&- | { grep -v 'version difference' || true; } >&2; return "${PIPESTATUS[0]}"; } 3>&1
}
