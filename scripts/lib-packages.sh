#!/usr/bin/env bash
# The Debian packages that hold the shared libraries of the given binaries, found so that no library
# can be missed silently: every library `ldd` prints must be found by the loader and owned by a
# package, or the script fails naming each one that is not.
#
#   scripts/lib-packages.sh BINARY...               print the packages, one per line, sorted
#   scripts/lib-packages.sh --check LIST BINARY...  fail unless every library is found and its
#                                                   package is listed in the file LIST
#
# The Dockerfile's build stage writes each image's package list with the first form; each image
# stage installs exactly that list and then runs the second form on its binary, so a library whose
# package the list lacks fails the image build with its name ("not found" by the loader there).
#
# Why not `ldd | xargs dpkg -S 2>/dev/null`: on a merged-/usr Debian the loader finds libraries as
# /lib/x86_64-linux-gnu/libfoo.so.1 while most packages own /usr/lib/x86_64-linux-gnu/libfoo.so.1
# (and a few, like libc6, the other way round), and a symlink's target may be owned where the link
# is not. Each library is looked up as printed, resolved through symlinks, and with and without the
# /usr prefix; only when all of those miss is it reported.
#
# Libraries under a prefix in LIB_PACKAGES_FROM_BASE (colon-separated; default /usr/local/cuda)
# need no package: the image's base provides them (the CUDA variant's runtime base). They are
# named on stderr, and --check still fails when the loader cannot find them.
set -euo pipefail
IFS=: read -r -a FROM_BASE <<< "${LIB_PACKAGES_FROM_BASE-/usr/local/cuda}"

usage() { echo "usage: $0 [--check LIST] BINARY..." >&2; exit 2; }

LIST=""
if [ "${1:-}" = --check ]; then
  [ $# -ge 2 ] || usage
  LIST=$2
  shift 2
  [ -r "$LIST" ] || { echo "lib-packages: cannot read the package list $LIST" >&2; exit 2; }
fi
[ $# -gt 0 ] || usage

# Candidate paths dpkg may know a library by.
candidates() {
  local p real
  real=$(realpath -e "$1" 2>/dev/null || echo "$1")
  for p in "$1" "$real"; do
    echo "$p"
    case "$p" in
      /usr/lib/* | /usr/lib64/* | /usr/lib32/*) echo "${p#/usr}" ;;
      /lib/* | /lib64/* | /lib32/*) echo "/usr$p" ;;
    esac
  done
}

errors=()
declare -A packages=()
# Pass 1: every library of every binary, as (binary, name, path).
bins=() libs=() paths=()
for bin in "$@"; do
  if [ ! -f "$bin" ]; then
    errors+=("$bin: no such file")
    continue
  fi
  if ! out=$(LC_ALL=C ldd "$bin" 2>&1); then
    errors+=("$bin: ldd failed: $out")
    continue
  fi
  while read -r line; do
    lib="" path=""
    case "$line" in
      *"=> not found"*)
        errors+=("$(basename "$bin"): ${line%% *} not found by the dynamic loader")
        continue ;;
      *"=> /"*)
        lib=${line%% *}
        path=${line#*=> }
        path=${path%% (*} ;;
      /*)  # the program interpreter, e.g. /lib64/ld-linux-x86-64.so.2 (0x...)
        path=${line%% (*}
        lib=$(basename "$path") ;;
      *) continue ;;  # linux-vdso.so.1 and other virtual objects
    esac
    bins+=("$(basename "$bin")") libs+=("$lib") paths+=("$path")
  done <<< "$out"
done

# Pass 2: one `dpkg -S` for every candidate path (it reads the whole package database each
# time). It prints "pkg[:arch][, pkg2...]: path" for each path some package owns.
declare -A owner_of=()
if [ ${#paths[@]} -gt 0 ]; then
  mapfile -t all < <(for p in "${paths[@]}"; do candidates "$p"; done | sort -u)
  while IFS= read -r line; do
    path=${line#*: }
    pkg=${line%%: /*}
    pkg=${pkg%%,*}
    owner_of[$path]=${pkg%%:*}
  done < <(LC_ALL=C dpkg -S "${all[@]}" 2>/dev/null | grep -E '^[^ ]+(, [^ ]+)*: /' || true)
fi

for i in "${!paths[@]}"; do
  bin=${bins[$i]} lib=${libs[$i]} path=${paths[$i]}
  base=""
  for prefix in "${FROM_BASE[@]}"; do
    if [ -n "$prefix" ] && [[ "$path" == "$prefix"* || "$(realpath -e "$path" 2>/dev/null)" == "$prefix"* ]]; then
      base=$prefix
    fi
  done
  if [ -n "$base" ]; then
    echo "lib-packages: $bin: $lib ($path) is under $base: the base image provides it" >&2
    continue
  fi
  pkg=""
  while read -r c; do
    if [ -n "${owner_of[$c]:-}" ]; then pkg=${owner_of[$c]}; break; fi
  done < <(candidates "$path")
  if [ -z "$pkg" ]; then
    errors+=("$bin: $lib ($path) belongs to no installed package")
    continue
  fi
  if [ -n "$LIST" ] && ! grep -qxF "$pkg" "$LIST"; then
    errors+=("$bin: $lib ($path) is in package $pkg, which $LIST does not list")
    continue
  fi
  packages[$pkg]=1
done

if [ ${#errors[@]} -gt 0 ]; then
  echo "lib-packages: ${#errors[@]} shared librar$([ ${#errors[@]} = 1 ] && echo y || echo ies) unresolved:" >&2
  printf '  %s\n' "${errors[@]}" >&2
  exit 1
fi
if [ -z "$LIST" ]; then
  printf '%s\n' "${!packages[@]}" | sort
fi
