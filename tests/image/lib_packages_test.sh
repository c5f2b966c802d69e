#!/usr/bin/env bash
# scripts/lib-packages.sh on this machine's build of the two binaries (no image needed):
# it finds the package of every library, merged-/usr paths included; the operator needs none of
# gRPC, protobuf or OpenBLAS; and each way a library can go missing fails, naming the library:
# a package dropped from the list (what an image stage installs), a library no package owns,
# a library the loader cannot find.
#   lib_packages_test.sh SOURCE_DIR KUBETRAIN_BINARY OPERATOR_BINARY
set -uo pipefail
SRC=$1 KT=$2 OP=$3
S="$SRC/scripts/lib-packages.sh"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
if ! command -v dpkg >/dev/null; then echo "SKIP: no dpkg: not a Debian machine"; exit 0; fi

# 1. Every library resolves; the packages the issue found missing are there.
"$S" "$KT" > "$T/runtime.txt" 2> "$T/err" || bad "runtime binary: $(cat "$T/err")"
"$S" "$OP" > "$T/operator.txt" 2> "$T/err" || bad "operator binary: $(cat "$T/err")"
echo "runtime packages: $(tr '\n' ' ' < "$T/runtime.txt")"
echo "operator packages: $(tr '\n' ' ' < "$T/operator.txt")"
for p in '^libc6$' '^libgrpc\+\+1' '^libprotobuf[0-9]' '^libopenblas0' '^libyaml-cpp0' '^libprometheus-cpp-core'; do
  grep -qE "$p" "$T/runtime.txt" && ok "runtime needs $p" || bad "runtime list lacks $p"
done
for p in '^libc6$' '^libcpprest' '^libssl3$'; do
  grep -qE "$p" "$T/operator.txt" && ok "operator needs $p" || bad "operator list lacks $p"
done
for p in grpc protobuf openblas; do
  grep -q "$p" "$T/operator.txt" && bad "the operator links $p: $(grep "$p" "$T/operator.txt" | tr '\n' ' ')" \
    || ok "the operator does not link $p"
done
# The merged-/usr case that hid libgrpc++ from `dpkg -S`: ldd prints /lib/..., the package owns /usr/lib/...
grpc_path=$(ldd "$KT" | awk '$1 ~ /^libgrpc\+\+\.so/ {print $3; exit}')
echo "ldd: libgrpc++ at $grpc_path; dpkg -S on that path: $(dpkg -S "$grpc_path" 2>&1 | head -1)"

# 2. A package dropped from the list: --check names the library it holds.
grpc_pkg=$(grep -E '^libgrpc\+\+1' "$T/runtime.txt" | head -1)
grep -vxF "$grpc_pkg" "$T/runtime.txt" > "$T/dropped.txt"
if "$S" --check "$T/dropped.txt" "$KT" 2> "$T/err"; then
  bad "--check passed without $grpc_pkg"
elif grep -q "libgrpc++.so.* is in package $grpc_pkg, which .* does not list" "$T/err"; then
  ok "without $grpc_pkg --check fails naming it:"; sed 's/^/    /' "$T/err"
else
  bad "--check without $grpc_pkg failed without naming libgrpc++: $(cat "$T/err")"
fi
"$S" --check "$T/runtime.txt" "$KT" 2> "$T/err" && ok "--check passes with the full list" \
  || bad "--check fails with the full list: $(cat "$T/err")"

# 3. A library that no package owns (a copy of zlib found first through LD_LIBRARY_PATH).
mkdir "$T/lib" && cp -L "$(ldd "$KT" | awk '$1 == "libz.so.1" {print $3}')" "$T/lib/"
if LD_LIBRARY_PATH="$T/lib" "$S" "$KT" > /dev/null 2> "$T/err"; then
  bad "a library owned by no package passed"
elif grep -q "libz.so.1 ($T/lib/libz.so.1) belongs to no installed package" "$T/err"; then
  ok "an unowned library fails naming it:"; sed 's/^/    /' "$T/err"
else
  bad "an unowned library failed without naming it: $(cat "$T/err")"
fi

# 4. A library the loader cannot find.
if command -v cc >/dev/null; then
  echo 'int kt_gone(void) { return 0; }' > "$T/gone.c"
  echo 'int kt_gone(void); int main(void) { return kt_gone(); }' > "$T/main.c"
  cc -shared -fPIC -o "$T/libkt_gone.so" "$T/gone.c" && cc -o "$T/prog" "$T/main.c" -L"$T" -lkt_gone
  rm "$T/libkt_gone.so"
  if "$S" "$T/prog" > /dev/null 2> "$T/err"; then
    bad "a library the loader cannot find passed"
  elif grep -q "libkt_gone.so not found by the dynamic loader" "$T/err"; then
    ok "a missing library fails naming it:"; sed 's/^/    /' "$T/err"
  else
    bad "a missing library failed without naming it: $(cat "$T/err")"
  fi
fi
[ "$fails" = 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
