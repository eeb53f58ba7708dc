#!/usr/bin/env bash
# The kernel's checks on a CUDA machine, in one go (issue 3): what the GPU host runs.
#
#   bash scripts/device_kernel.sh            # from the repository root
#
# 1. nvidia-smi; 2. every kernel variant compiled with nvcc for sm_90 and ptxas's resource
# report; 3. the GPU tests (bit-exact against the CPU reference); 4. compute-sanitizer memcheck
# on a few small GPU tests, where compute-sanitizer exists; 5. the kernel benchmark.
# Logs go to $OUT (default: a temporary folder); a short summary and the benchmark table come
# last.
set -u -o pipefail

OUT=${OUT:-$(mktemp -d -t edgecli-device-XXXX)}
mkdir -p "$OUT"
# Import edgecli without putting the repository root on sys.path: the root's cuda/ package
# (the kernel sources) would shadow NVIDIA's `cuda` namespace package, which CuPy imports
# (cuda.pathfinder). Hence a directory holding only a link to edgecli/, `python3 -P` (no
# current directory on sys.path) and pytest's importlib mode (no rootdir on sys.path).
EDGECLI_PATH=$(mktemp -d)
ln -s "$PWD/edgecli" "$EDGECLI_PATH/edgecli"
export PYTHONPATH=$EDGECLI_PATH PYTHONUNBUFFERED=1
PYTEST=(python3 -P -m pytest --import-mode=importlib -p no:cacheprovider)

step() { echo; echo "=== $* ==="; }

step "device"
nvidia-smi 2>&1 | tee "$OUT/nvidia-smi.txt"
python3 -P -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" \
    2>&1 | tee -a "$OUT/nvidia-smi.txt"

step "kernel check (nvcc, sm_90, ptxas -v)"
python3 -P -m edgecli.kernels --check --resources 2>&1 | tee "$OUT/kernel-check.txt"
check_rc=$?

step "GPU tests"
timeout 240 "${PYTEST[@]}" -m gpu tests/test_gpu.py -q -rs --maxfail=15 \
    -o timeout=120 2>&1 \
    | tee "$OUT/test-gpu.txt"
tests_rc=$?

sanitizer_rc=skipped
if command -v compute-sanitizer >/dev/null; then
    step "compute-sanitizer memcheck (small cases)"
    timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
        "${PYTEST[@]}" -m gpu tests/test_gpu.py -q \
        -k "17x31-reflect101-l1 or 1x1-constant-l2 or few_blocks_loop_over_many_tiles and 33" \
        2>&1 | tail -n 40 | tee "$OUT/sanitizer.txt"
    sanitizer_rc=$?
fi

step "kernel benchmark"
timeout 200 python3 benchmarks/kernel.py --json "$OUT/kernel-bench.json" 2>&1 | tee "$OUT/kernel-bench.txt"
bench_rc=$?

step "summary"
echo "kernel check: exit $check_rc; $(tail -n 1 "$OUT/kernel-check.txt")"
echo "GPU tests:    exit $tests_rc; $(grep -E '(passed|failed|error)' "$OUT/test-gpu.txt" | tail -n 1)"
echo "sanitizer:    exit $sanitizer_rc; $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.txt" 2>/dev/null | tail -n 1)"
echo "benchmark:    exit $bench_rc"
grep -E '^(Batches|\|)' "$OUT/kernel-bench.txt"
[ "$check_rc" = 0 ] && [ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
