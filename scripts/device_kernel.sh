#!/usr/bin/env bash
# The kernel's checks on a CUDA machine, in one go (issue 3): what the GPU host runs.
#
#   bash scripts/device_kernel.sh            # from the repository root
#
# 1. nvidia-smi; 2. every kernel variant compiled with nvcc for sm_90 and ptxas's resource
# report; 3. every GPU test (bit-exact against the CPU reference); 4. compute-sanitizer memcheck
# on a few small GPU tests, where compute-sanitizer exists; 5. with EDGECLI_NCU=1, Nsight
# Compute (ncu) on two launches of the default variant; 6. the kernel benchmark.
# Logs go to $OUT (default: a temporary folder); a short summary and the benchmark table come
# last.
set -u -o pipefail

OUT=${OUT:-$(mktemp -d -t edgecli-device-XXXX)}
mkdir -p "$OUT"
# The repository root on the import path (edgecli, benchmarks); cuda/ holds only the kernel
# sources, no Python package, so it shadows nothing.
export PYTHONPATH=. PYTHONUNBUFFERED=1
PYTEST=(python3 -m pytest -p no:cacheprovider)

step() { echo; echo "=== $* ==="; }

step "device"
nvidia-smi 2>&1 | tee "$OUT/nvidia-smi.txt"
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" \
    2>&1 | tee -a "$OUT/nvidia-smi.txt"

step "kernel check (nvcc, sm_90, ptxas -v)"
python3 -m edgecli.kernels --check --resources 2>&1 | tee "$OUT/kernel-check.txt"
check_rc=$?

step "GPU tests"
timeout 300 "${PYTEST[@]}" -m gpu tests -q -rs --maxfail=15 \
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

ncu_rc=skipped
if [ "${EDGECLI_NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
    # The two launches of --single (the default variant, one 1080p batch), clocks as found.
    step "ncu (one 1080p batch)"
    timeout 120 ncu --clock-control none -k edges_bgr --launch-count 2 \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
        --section WarpStateStats --section SchedulerStats --section LaunchStats \
        --section ComputeWorkloadAnalysis --section InstructionStats \
        python3 benchmarks/kernel.py --single 2>&1 | tee "$OUT/ncu.txt"
    ncu_rc=$?
    # Where the warps wait: the per-reason stall counters (no sampling needed).
    timeout 120 ncu --clock-control none -k edges_bgr --launch-count 1 \
        --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
        python3 benchmarks/kernel.py --single 2>&1 | tee "$OUT/ncu-stalls.txt"
fi

step "kernel benchmark"
timeout 200 python3 benchmarks/kernel.py --json "$OUT/kernel-bench.json" 2>&1 | tee "$OUT/kernel-bench.txt"
bench_rc=$?

step "summary"
echo "kernel check: exit $check_rc; $(tail -n 1 "$OUT/kernel-check.txt")"
echo "GPU tests:    exit $tests_rc; $(grep -E '(passed|failed|error)' "$OUT/test-gpu.txt" | tail -n 1)"
echo "sanitizer:    exit $sanitizer_rc; $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.txt" 2>/dev/null | tail -n 1)"
echo "ncu:          exit $ncu_rc"
echo "benchmark:    exit $bench_rc"
grep -E '^(Batches|\|)' "$OUT/kernel-bench.txt"
[ "$check_rc" = 0 ] && [ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
