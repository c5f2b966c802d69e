#!/usr/bin/env bash
# docs/design.md's "Layout" section matches the tree:
#  - every path it names in backticks (`api/`, `runtime/main.cc`, ...) exists;
#  - every source directory (one holding .cc, .h or .proto files under api/,
#    operator/, runtime/, proto/, or a directory of tests/ holding tests) is
#    named, itself or through its parent's entry for tests/.
# Usage: design_layout_test.sh [repository root]
set -euo pipefail
ROOT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
DOC="$ROOT/docs/design.md"
[ -f "$DOC" ] || { echo "FAIL: $DOC is missing"; exit 1; }

# The section, from "## Layout" to the next "## " heading.
section="$(awk '/^## Layout/{on=1; next} /^## /{on=0} on' "$DOC")"
[ -n "$section" ] || { echo "FAIL: docs/design.md has no '## Layout' section"; exit 1; }

# Backticked tokens that look like paths: contain a '/' or a '.' and no spaces.
mapfile -t named < <(grep -o '`[^` ]*`' <<<"$section" | tr -d '`' | grep -E '/|\.' | sort -u)
fail=0
for p in "${named[@]}"; do
  # `kubetrain_library(<part> ...` and similar code are not paths.
  [[ "$p" =~ ^[A-Za-z0-9_./-]+$ ]] || continue
  if [ ! -e "$ROOT/$p" ]; then
    echo "FAIL: docs/design.md names $p, which does not exist"
    fail=1
  fi
done

is_named() {
  local dir="$1/"
  for p in "${named[@]}"; do
    [ "$p" = "$dir" ] && return 0
  done
  return 1
}

# Source directories must be named.
while IFS= read -r dir; do
  rel="${dir#"$ROOT"/}"
  case "$rel" in
    tests/*/*) continue ;;  # covered by its tests/<part>/ entry
    proto/kubetrain) continue ;;
  esac
  if ! is_named "$rel"; then
    echo "FAIL: $rel/ holds sources but docs/design.md's Layout does not name it"
    fail=1
  fi
done < <(find "$ROOT/api" "$ROOT/operator" "$ROOT/runtime" "$ROOT/proto" "$ROOT/tests" \
           -type f \( -name '*.cc' -o -name '*.h' -o -name '*.proto' -o -name '*.cu' \
           -o -name '*.sh' -o -name '*.mjs' \) -printf '%h\n' | sort -u | grep -v '/testdata')

if [ "$fail" = 0 ]; then
  echo "docs/design.md: ${#named[@]} paths named, all present; every source directory named"
fi
exit "$fail"
