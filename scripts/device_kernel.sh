#!/usr/bin/env bash
# The kernel's checks on a CUDA machine, in one go: what the GPU host runs.
#
#   bash scripts/device_kernel.sh            # from the repository root
#
# 1. nvidia-smi and `edgecli info`; 2. every GPU test (bit-exact against the CPU reference,
# the kernel as compiled for this GPU and as PTX for sm_80 and sm_75); 3. compute-sanitizer
# memcheck and racecheck on small kernel cases, both code paths, where compute-sanitizer
# exists; 4. the kernel benchmark with the grid sweep; 5. start-up times. (The ahead-of-time
# compile check for every architecture, make kernel-check, needs no GPU and runs in make test.)
# Logs go to $OUT (default: a temporary folder); a short summary comes last.
set -u -o pipefail

OUT=${OUT:-$(mktemp -d -t edgecli-device-XXXX)}
# The repository root on the import path (edgecli, benchmarks).
source scripts/device_env.sh
PYTEST=(python3 -m pytest -p no:cacheprovider)
SMALL="17x31-reflect101-l1 or 1x1-constant-l2 or 61x144-replicate-l2 or few_blocks and 33x65"

step() { echo; echo "=== $* ==="; }

step "device"
nvidia-smi 2>&1 | tee "$OUT/nvidia-smi.txt"
python3 -m edgecli info 2>&1 | tee -a "$OUT/nvidia-smi.txt"

step "GPU tests"
timeout 400 "${PYTEST[@]}" -m gpu tests -q -rfEs --tb=short --maxfail=10 2>&1 | tee "$OUT/test-gpu.txt"
tests_rc=$?

sanitizer_rc=skipped
if command -v compute-sanitizer >/dev/null; then
    sanitizer_rc=0
    for tool in memcheck racecheck; do
        step "compute-sanitizer $tool (small cases, both code paths)"
        timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 9 \
            "${PYTEST[@]}" -m gpu tests/test_gpu.py -q -k "$SMALL" \
            2>&1 | tail -n 30 | tee "$OUT/sanitizer-$tool.txt"
        rc=$?
        [ "$rc" = 0 ] || sanitizer_rc=$rc
    done
fi

step "kernel benchmark"
timeout 200 python3 benchmarks/kernel.py --blocks-per-sm --runs 40 --json "$OUT/kernel-bench.json" \
    2>&1 | tee "$OUT/kernel-bench.txt"
bench_rc=$?

step "start-up"
timeout 120 python3 benchmarks/startup.py --runs 5 2>&1 | tee "$OUT/startup.txt"
startup_rc=$?

step "summary"
echo "GPU tests:    exit $tests_rc; $(grep -E '(passed|failed|error)' "$OUT/test-gpu.txt" | tail -n 1)"
for tool in memcheck racecheck; do
    echo "$tool:    exit $sanitizer_rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' \
        "$OUT/sanitizer-$tool.txt" 2>/dev/null | tail -n 1)"
done
echo "benchmark:    exit $bench_rc; start-up: exit $startup_rc"
grep -E '^(Batches|\|)' "$OUT/kernel-bench.txt"
grep -E '^\|' "$OUT/startup.txt"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ] && [ "$sanitizer_rc" != 9 ]
