#!/usr/bin/env bash
# Issue 42's GPU work in one call on the GPU host (from the repository root), in about 5-9
# minutes on 16 cores: the Canny GPU tests, the kernel benchmark (benchmarks/kernel.py: the
# Canny kernels beside the Sobel kernel and a device copy, 1080p and 4K; it has no option to
# time only the Canny rows, so it runs whole, without the grid sweep), and the whole runs
# (benchmarks/canny_runs.py: --operator canny against sobel on 2,400 1080p JPEGs and 10 H.264
# clips, the Canny PNGs against --backend cpu's, and the OpenCV scripts).
#
# The host has no video encoder: bench_data/pan.mp4 (3.3 MB at 1080p, `make_bench_media.py
# --only video`) is made elsewhere and carried, and so is edgecli/_native.abi3.so where it is
# built (git ignores both); the q95 JPEG folder is drawn here in seconds.
#
#   OUT=/some/dir scripts/device_canny.sh
#   OUT=/tmp/dry RUNS_ARGS="--backend cpu --frames 48 --clips 1" scripts/device_canny.sh
#
# Writes $OUT/tests.txt, $OUT/kernel.txt and kernel.json, $OUT/canny_runs.txt and
# canny_runs.json; the summary comes last. Environment: OUT (default bench_out), DATA
# (bench_data), PYTHON (python3), TESTS_S (200), KERNEL_S (150), RUNS_S (200): each step's
# time limit; INTO (tmpfs: where the whole runs write, so that no run pays for the writeback
# of the runs before it; disk to see the disk's effect); RUNS_ARGS, more options for canny_runs.py (the second line above: a dry run on
# a machine without a GPU).
set -u -o pipefail

TESTS_S=${TESTS_S:-200}
KERNEL_S=${KERNEL_S:-150}
RUNS_S=${RUNS_S:-200}
INTO=${INTO:-tmpfs}
read -r -a runs_args <<< "${RUNS_ARGS:-}"
source scripts/device_env.sh

step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

step "host"
nvidia-smi -L || echo "nvidia-smi: not available"
echo "nproc: $(nproc)"
"$PYTHON" -m edgecli info || echo "edgecli info failed"
[[ -f "$DATA/pan.mp4" ]] || echo "warning: $DATA/pan.mp4 not carried over: no clips rows"
if [[ ! -d "$DATA/q95/jpeg" ]]; then
    "$PYTHON" scripts/make_bench_media.py --only jpeg --jpeg-quality 95 --out "$DATA/q95"
fi

step "GPU tests of Canny"
timeout "$TESTS_S" "$PYTHON" -m pytest -m gpu -q -rfEs --tb=short -p no:cacheprovider \
    tests/test_gpu_canny.py tests/test_canny.py tests/test_canny_kernels.py \
    tests/test_canny_cli.py > "$OUT/tests.txt" 2>&1
tests_rc=$?
tail -n 40 "$OUT/tests.txt"

step "kernel benchmark"
timeout "$KERNEL_S" "$PYTHON" benchmarks/kernel.py --runs 30 --json "$OUT/kernel.json" \
    > "$OUT/kernel.txt" 2>&1
kernel_rc=$?
tail -n 40 "$OUT/kernel.txt"

step "whole runs"
timeout "$RUNS_S" "$PYTHON" benchmarks/canny_runs.py --data "$DATA" --jpeg "$DATA/q95/jpeg" \
    --into "$INTO" --json "$OUT/canny_runs.json" "${runs_args[@]}" 2>&1 | tee "$OUT/canny_runs.txt"
runs_rc=$?

step "summary"
echo "GPU tests: exit $tests_rc; $(grep -E '(passed|failed|error|skipped)' "$OUT/tests.txt" \
    | tail -n 1)"
grep -E '^(FAILED|ERROR)' "$OUT/tests.txt" | cut -c1-200 | head -n 10
echo "kernel benchmark: exit $kernel_rc (Canny's rows, the Sobel kernel's and the copy's)"
grep -E '^device-to-device copy' "$OUT/kernel.txt"
grep -E '^\|' "$OUT/kernel.txt" | grep -E 'resolution|---|Canny|fused, l[12] \('
echo "whole runs: exit $runs_rc"
sed -n '/^backend /,/^(/p' "$OUT/canny_runs.txt"
[[ $tests_rc == 0 && $kernel_rc == 0 && $runs_rc == 0 ]]
