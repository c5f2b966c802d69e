#!/usr/bin/env bash
# Builds kubetrain here with CUDA on and packs what a GPU machine needs to run
# it and its GPU tests and benchmarks: the machine has CUDA 13 (driver,
# cuBLAS, NCCL), CMake and PyTorch, but none of our Debian libraries, and
# nothing can be fetched there.
#
#   scripts/gpu-run.sh [--with-data] [--out FILE]
#
# builds the binaries below in build/ (KUBETRAIN_WITH_CUDA=ON), copies them
# with every shared library `ldd` lists except the CUDA ones (the GPU
# machine's driver, cudart, cuBLAS and NCCL are used) into kubetrain-gpu/,
# adds kubetrain-gpu/run.sh, bench/gpu_vs_pytorch.py and bench/gpu_jobs.py,
# and writes a compressed tarball (default .cache/gpu/kubetrain-gpu.tar.gz,
# git-ignored), failing when it is 64 MiB or more (the device tool's carry
# limit). --with-data adds Fashion-MNIST (about 30 MB) for the accuracy run.
#
# On the GPU machine (with the device tool: carry the tarball):
#   tar xzf .cache/gpu/kubetrain-gpu.tar.gz -C /tmp
#   /tmp/kubetrain-gpu/run.sh devices          # kubetrain devices
#   /tmp/kubetrain-gpu/run.sh test             # the `gpu` tests (gpu_pod_test: 2+ GPUs), NCCL and
#                                              #   the device exchange, backend choice
#   /tmp/kubetrain-gpu/run.sh train --model cnn --device cuda --gpus 2 ...   # one pod, 2 GPUs
#   /tmp/kubetrain-gpu/run.sh train --model cnn --device cuda ...
#   /tmp/kubetrain-gpu/run.sh bench [args]     # samples/s against PyTorch eager and CUDA graph
#                                              #   (bench/gpu_vs_pytorch.py --help)
#   /tmp/kubetrain-gpu/run.sh jobs [args]      # job samples/s against one process: allreduce
#                                              #   and PS jobs (bench/gpu_jobs.py --help)
#   /tmp/kubetrain-gpu/run.sh exec BINARY [args]   # any packed binary, e.g. kubetrain_bench
#   /tmp/kubetrain-gpu/run.sh checks [OUT_DIR]  # every GPU test and benchmark, each with a
#                                              #   timeout, logs in OUT_DIR (scripts/gpu-checks.sh)
# bench and jobs pass --data (the packed Fashion-MNIST with --with-data, else
# /usr/share/datasets/fashion-mnist) and --kubetrain bin/kubetrain-launch, a
# wrapper that runs kubetrain through run.sh (so the replicas of `kubetrain
# run` get the same environment).
# run.sh sets LD_LIBRARY_PATH to the packed libraries, then the machine's
# CUDA libraries (/usr/local/cuda/lib64, PyTorch's nvidia/*/lib); when the
# machine's glibc is older than this build's it starts the binaries through
# the packed dynamic loader and glibc instead. Pipelines there and here let
# every writer finish (no `| head` under pipefail: a writer killed by SIGPIPE
# would fail the script with 141 at random).
set -euo pipefail

cd "$(dirname "$0")/.."
out=.cache/gpu/kubetrain-gpu.tar.gz
with_data=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --with-data) with_data=1 ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo pipefail/{/^set /!p}' "$0"; exit 0 ;;
    *) echo "gpu-run.sh: unknown argument '$1' (--with-data, --out FILE)" >&2; exit 2 ;;
  esac
  shift
done

targets=(kubetrain gpu_parity_test gpu_pod_test cuda_runtime_test nccl_collective_test
         collective_backend_test kubetrain_bench)
echo "gpu-run.sh: building ${targets[*]} with CUDA in build/" >&2
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd .. && pwd)}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKUBETRAIN_WITH_CUDA=ON >/dev/null
cmake --build build -j"$(nproc)" --target "${targets[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/kubetrain-gpu"
mkdir -p "$root/bin" "$root/lib" "$root/glibc" "$root/bench"
cp build/runtime/kubetrain build/tests/runtime/train/gpu_parity_test build/tests/runtime/train/gpu_pod_test \
   build/tests/runtime/tensor/cuda_runtime_test build/tests/runtime/exchange/allreduce/nccl_collective_test \
   build/tests/runtime/exchange/allreduce/collective_backend_test build/bench/kubetrain_bench "$root/bin/"
cp bench/gpu_vs_pytorch.py bench/gpu_jobs.py "$root/bench/"
cp scripts/gpu-checks.sh "$root/checks.sh"

# Libraries the GPU machine brings itself: the CUDA driver and toolkit.
is_cuda() { [[ "$1" =~ ^lib(cuda|cudart|cublas|cublasLt|nccl|nvidia-|nvrtc|nvJitLink) ]]; }
# glibc: used only through the packed loader (see run.sh).
is_glibc() { [[ "$1" =~ ^(libc|libm|libdl|librt|libpthread|libresolv|libutil|ld-linux-x86-64)\.so ]]; }
for bin in "$root"/bin/*; do
  ldd "$bin" | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/lib/ {print $1}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  if is_cuda "$name"; then continue; fi
  if is_glibc "$name"; then cp -L "$lib" "$root/glibc/$name"; else cp -L "$lib" "$root/lib/$name"; fi
done
# awk reads all of ldd's output: `| head -1` would let ldd die of SIGPIPE (141).
ldd --version | awk 'NR == 1 {print $NF}' > "$root/glibc/VERSION"

if [[ $with_data == 1 ]]; then
  mkdir -p "$root/data/fashion-mnist"
  cp /usr/share/datasets/fashion-mnist/*.gz "$root/data/fashion-mnist/"
fi

cat > "$root/run.sh" <<'RUN'
#!/usr/bin/env bash
# kubetrain on a GPU machine without our Debian libraries (scripts/gpu-run.sh).
#   run.sh devices | test | bench [args] | jobs [args] | train [args] | exec BINARY [args]
# Under pipefail every pipeline's reader consumes all its input (awk NR == 1,
# sed -n 1p, never head): a writer killed by SIGPIPE would exit this with 141.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cuda_dirs=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib
if py=$(command -v python3); then
  torch_libs=$("$py" - <<'PY' 2>/dev/null || true
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
print(":".join(d for r in roots for d in sorted(glob.glob(os.path.join(r, "*", "lib")))))
PY
)
  [[ -n "$torch_libs" ]] && cuda_dirs="$cuda_dirs:$torch_libs"
fi
export LD_LIBRARY_PATH="$here/lib:$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
built=$(cat "$here/glibc/VERSION")
have=$(ldd --version 2>/dev/null | awk 'NR == 1 {print $NF}') || true  # no ldd: the packed glibc
launch=()
if [[ -z "$have" || "$(printf '%s\n%s\n' "$built" "$have" | sort -V | sed -n 1p)" != "$built" ]]; then
  # This machine's glibc is older than the build's: use the packed one.
  launch=("$here/glibc/ld-linux-x86-64.so.2" --library-path "$here/glibc:$LD_LIBRARY_PATH")
fi
run() { "${launch[@]}" "$here/bin/$1" "${@:2}"; }
# `kubetrain run` starts its replicas with this wrapper, so they get the same
# libraries (and loader) as kubetrain itself.
export KUBETRAIN_EXE="$here/bin/kubetrain-launch"
data="$here/data/fashion-mnist"
[[ -d "$data" ]] || data=/usr/share/datasets/fashion-mnist
cmd="${1:-devices}"
shift || true
case "$cmd" in
  devices) run kubetrain devices ;;
  train) run kubetrain train --data "$data" "$@" ;;
  test)
    # Every suite runs, whatever an earlier one gave; the exit is the first failure's.
    rc=0
    for t in cuda_runtime_test gpu_parity_test gpu_pod_test nccl_collective_test collective_backend_test; do
      set +e
      run "$t" "$@"
      s=$?
      set -e
      if [[ $rc == 0 && $s != 0 ]]; then rc=$s; fi
    done
    exit "$rc" ;;
  bench)
    python3 "$here/bench/gpu_vs_pytorch.py" --kubetrain "$here/bin/kubetrain-launch" --data "$data" "$@" ;;
  jobs)
    python3 "$here/bench/gpu_jobs.py" --kubetrain "$here/bin/kubetrain-launch" --data "$data" "$@" ;;
  exec) run "$@" ;;
  checks) bash "$here/checks.sh" "$@" ;;
  *) echo "run.sh: unknown command '$cmd' (devices, test, bench, jobs, train, exec, checks)" >&2; exit 2 ;;
esac
RUN
# The bench script runs kubetrain as a plain executable: a launcher that
# applies the same environment.
cat > "$root/bin/kubetrain-launch" <<'LAUNCH'
#!/usr/bin/env bash
exec "$(dirname "$0")/../run.sh" exec kubetrain "$@"
LAUNCH
chmod +x "$root/run.sh" "$root/bin/kubetrain-launch"

mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out" kubetrain-gpu
size=$(stat -c %s "$out")
echo "gpu-run.sh: $out $((size / 1024 / 1024)) MiB ($size bytes)" >&2
if (( size >= 64 * 1024 * 1024 )); then
  echo "gpu-run.sh: error: $out is over the 64 MiB carry limit (drop --with-data?)" >&2
  exit 1
fi
