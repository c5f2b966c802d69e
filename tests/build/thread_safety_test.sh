#!/usr/bin/env bash
# Clang's thread-safety analysis over every translation unit of runtime/, operator/ and api/:
# the ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED / ABSL_LOCKS_EXCLUDED annotations
# (absl/base/thread_annotations.h) are checked, not decorative. Each TU is compiled
# `clang++ -fsyntax-only -Wthread-safety -Werror=thread-safety` with the include paths and
# defines of the CMake build (its compile_commands.json); the build's own GCC warning flags
# are dropped, so only the thread-safety analysis decides. Then a negative fixture
# (testdata/thread_safety_negative.cc: a guarded field read without its lock) must fail,
# proving the check can.
#
# A TU that clang refuses fails the test, unless thread_safety_exceptions.txt lists it and
# every error it gives matches that entry; a listed TU that compiles cleanly fails the test
# too (remove its entry), as does an entry naming no TU of the build.
#
# Usage: thread_safety_test.sh <repository root> <build dir>
# Environment: KUBETRAIN_CLANGXX (a clang++ to use), KUBETRAIN_TSA_JOBS (parallel
# compiles; default 2), KUBETRAIN_TSA_FILTER (a Python regex: only the TUs whose path
# it matches, e.g. 'runtime/launcher/'; for a quick look while editing).
# Exit 77 (CTest: skipped) when no clang++ is installed (scripts/setup.sh installs
# Debian's `clang`).
set -euo pipefail
ROOT="$(cd "${1:?usage: thread_safety_test.sh <root> <build dir>}" && pwd)"
BUILD="$(cd "${2:?usage: thread_safety_test.sh <root> <build dir>}" && pwd)"
JOBS="${KUBETRAIN_TSA_JOBS:-2}"
HERE="$ROOT/tests/build"

CLANGXX="${KUBETRAIN_CLANGXX:-}"
if [ -z "$CLANGXX" ]; then
  for c in clang++ clang++-14; do
    if command -v "$c" >/dev/null 2>&1; then
      CLANGXX="$(command -v "$c")"
      break
    fi
  done
fi
if [ -z "$CLANGXX" ]; then
  echo "SKIP: no clang++ on the PATH (scripts/setup.sh installs Debian's clang); the" \
    "thread-safety annotations were not checked"
  exit 77
fi
DB="$BUILD/compile_commands.json"
[ -f "$DB" ] || {
  echo "FAIL: $DB is missing (CMAKE_EXPORT_COMPILE_COMMANDS is ON in CMakeLists.txt)"
  exit 1
}

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
CHECK_FLAGS=(-fsyntax-only -Wthread-safety -Werror=thread-safety)

# One response file per TU: the build's arguments without the compiler, the output and
# the warning flags. $WORK/tus: a line per TU, "directory<TAB>source<TAB>response file".
python3 - "$ROOT" "$DB" "$WORK" "$HERE/testdata/thread_safety_negative.cc" \
  "${KUBETRAIN_TSA_FILTER:-}" <<'EOF'
import json, os, re, shlex, sys

root, db, work, fixture, only = sys.argv[1:]
dirs = tuple(os.path.join(root, d) + os.sep for d in ("runtime", "operator", "api"))
# C++ TUs only: .cu files are nvcc's (their host code is checked where it is C++).
entries = sorted((e for e in json.load(open(db))
                  if e["file"].startswith(dirs) and e["file"].endswith((".cc", ".cpp"))),
                 key=lambda e: e["file"])
selected = [e for e in entries if re.search(only, e["file"])] if only else entries


def args_of(e):
    argv = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    out, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = a == "-o"
            continue
        # GCC's warning set is the normal build's business; only -Wthread-safety decides here.
        if a.startswith("-W") or a == e["file"]:
            continue
        out.append(a)
    return out


def write_rsp(path, args):
    with open(path, "w") as f:
        f.write("\n".join(shlex.quote(a) for a in args) + "\n")


with open(os.path.join(work, "tus"), "w") as tus:
    for i, e in enumerate(selected):
        rsp = os.path.join(work, f"tu{i}.rsp")
        write_rsp(rsp, args_of(e) + [e["file"]])
        tus.write(f"{e['directory']}\t{e['file']}\t{rsp}\n")
with open(os.path.join(work, "all"), "w") as f:
    f.write("".join(os.path.relpath(e["file"], root) + "\n" for e in entries))
# The fixture compiles with the flags of a runtime TU (abseil's include path).
base = next(e for e in entries if "/runtime/" in e["file"])
write_rsp(os.path.join(work, "fixture.rsp"), args_of(base) + [fixture])
with open(os.path.join(work, "fixture.dir"), "w") as f:
    f.write(base["directory"])
EOF

count="$(wc -l <"$WORK/tus")"
[ "$count" -gt 0 ] || { echo "FAIL: no runtime/, operator/ or api/ TU selected from $DB"; exit 1; }
echo "thread-safety analysis: $count TUs with $("$CLANGXX" --version | head -1), $JOBS at a time"

# Each TU: clang's diagnostics in <rsp>.log and its exit status in <rsp>.rc.
export CLANGXX
export CHECK_FLAGS_STR="${CHECK_FLAGS[*]}"
start=$SECONDS
# shellcheck disable=SC2016 # the script is for the inner bash
tr '\n' '\0' <"$WORK/tus" | xargs -0 -P "$JOBS" -n 1 bash -c '
  IFS=$'"'"'\t'"'"' read -r dir _ rsp <<<"$1"
  rc=0
  # shellcheck disable=SC2086
  (cd "$dir" && "$CLANGXX" $CHECK_FLAGS_STR @"$rsp") >"$rsp.log" 2>&1 || rc=$?
  echo "$rc" >"$rsp.rc"' _
echo "compiled in $((SECONDS - start)) s"

fail=0
# Each TU's result against the exceptions.
python3 - "$ROOT" "$WORK" "$HERE/thread_safety_exceptions.txt" <<'EOF' || fail=1
import os, re, sys

root, work, exceptions_file = sys.argv[1:]
# Blocks of "path:", "allow:" (one or more regexes) and "why:" lines; '#' starts a comment.
exceptions, cur = {}, None
for line in open(exceptions_file):
    line = line.rstrip("\n")
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    key, _, value = line.partition(":")
    value = value.strip()
    if key == "path":
        cur = exceptions.setdefault(value, {"allow": [], "why": ""})
    elif key == "allow" and cur is not None:
        cur["allow"].append(re.compile(value))
    elif key == "why" and cur is not None:
        cur["why"] = value
    else:
        print(f"FAIL: {exceptions_file}: cannot read the line {line!r}")
        sys.exit(1)

failed = False
all_tus = set(open(os.path.join(work, "all")).read().split())
for path in sorted(set(exceptions) - all_tus):
    print(f"FAIL: thread_safety_exceptions.txt lists {path}, which is no TU of this build: "
          "remove its entry")
    failed = True

known = 0
for line in open(os.path.join(work, "tus")):
    _, file, rsp = line.rstrip("\n").split("\t")
    path = os.path.relpath(file, root)
    rc = int(open(rsp + ".rc").read())
    log = open(rsp + ".log").read()
    errors = [l for l in log.splitlines() if " error: " in l]
    entry = exceptions.get(path)
    if rc == 0:
        if entry is not None:
            print(f"FAIL: {path} is clean now: remove its entry from thread_safety_exceptions.txt")
            failed = True
        continue
    if entry is not None and errors:
        unexpected = [l for l in errors if not any(a.search(l) for a in entry["allow"])]
        if not unexpected:
            known += 1
            print(f"known: {path}: {len(errors)} error(s) listed in thread_safety_exceptions.txt "
                  f"({entry['why']})")
            continue
        print(f"FAIL: {path}: errors beyond its thread_safety_exceptions.txt entry:")
        print("\n".join(unexpected))
        failed = True
        continue
    print(f"FAIL: {path}")
    print(log)
    failed = True
if known:
    print(f"{known} TU(s) with known findings in files whose owners fix them "
          "(thread_safety_exceptions.txt)")
sys.exit(1 if failed else 0)
EOF

# The check can fail: a guarded field read without its lock is an error.
fixture_log="$WORK/fixture.log"
if (cd "$(cat "$WORK/fixture.dir")" && "$CLANGXX" "${CHECK_FLAGS[@]}" @"$WORK/fixture.rsp") \
  >"$fixture_log" 2>&1; then
  echo "FAIL: tests/build/testdata/thread_safety_negative.cc compiled: the analysis is not on"
  fail=1
elif ! grep -q "requires holding mutex 'mu_'.*-Werror,-Wthread-safety" "$fixture_log"; then
  echo "FAIL: the negative fixture failed, but not with the thread-safety error expected:"
  cat "$fixture_log"
  fail=1
else
  echo "negative fixture: refused as expected ($(grep -c 'error:' "$fixture_log") error(s))"
fi

if [ "$fail" = 0 ]; then
  echo "PASS: $count TUs under -Wthread-safety, none with an unlisted error"
fi
exit "$fail"
