#!/usr/bin/env bash
# The GPU's check of JPEG scans (cuda/jpeg_check.cu) and the small-run rule, in one call on
# the GPU host (from the repository root), in under 9 minutes, the figures that matter first:
# 1. every GPU test (scripts/device_tests.sh), the check's among them;
# 2. benchmarks/jpeg_scans.py: per file, the CPU's walk and plan against cv2.imdecode; the
#    check kernel alone on batches of 32 and 128 files (device events); whole --decode auto
#    runs of FRAMES links to the q95 JPEGs, PNGs into tmpfs, with the check
#    (EDGECLI_GPU_SCAN_CHECK=1), with the reading workers' walk of every scan (the default)
#    and with the markers' check alone, in ROUNDS alternating rounds;
# 3. benchmarks/startup.py: one small JPEG with --backend cpu, auto (the CPU for so small a
#    run) and cuda; then benchmarks/profile_run.py: where a FRAMES-JPEG run's threads spend
#    their time;
# 4. the check's tests of damaged files, lying and random plans under compute-sanitizer memcheck (where
#    the host has it), last: they may run into the call's end.
#
# Carry edgecli/_native.abi3.so (make install builds it), the GPU decoders' wheels (.whl) and
# bench_data/pan.mp4; the q95 JPEGs are made here.
#
#   OUT=/some/dir scripts/device_scan_check.sh
#
# Environment: OUT, DATA, PYTHON (device_env.sh), FRAMES (12000), ROUNDS (3).
set -euo pipefail

FRAMES=${FRAMES:-12000}
ROUNDS=${ROUNDS:-3}
source scripts/device_env.sh
scripts/device_tests.sh
[[ -d "$DATA/q95/jpeg" ]] || "$PYTHON" scripts/make_bench_media.py --out "$DATA/q95" \
    --frames 240 --only jpeg --jpeg-quality 95 > "$OUT/media.txt" 2>&1
links=$(mktemp -d)
files=("$(cd "$DATA/q95/jpeg" && pwd)"/*.jpg)
for ((i = 0; i < FRAMES; i++)); do
    ln -s "${files[i % ${#files[@]}]}" "$links/$(printf %06d "$i").jpg"
done
"$PYTHON" benchmarks/jpeg_scans.py "$links" --rounds "$ROUNDS" --decodes auto 2>&1 \
    | tee "$OUT/jpeg_scans.txt"
rm -rf "$links"
"$PYTHON" benchmarks/startup.py --runs 5 2>&1 | tail -n 12 | tee "$OUT/startup.txt"
"$PYTHON" benchmarks/profile_run.py "$DATA/q95/jpeg" --frames "$FRAMES" --decode auto \
    --json "$OUT/profile_jpeg.json" > "$OUT/profile_jpeg.txt" 2>&1 || true
head -n 1 "$OUT/profile_jpeg.txt"
# The CUDA toolkit's compute-sanitizer, where PATH does not name it.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
    /opt/nvidia/*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
if [[ -n "$sanitizer" ]]; then
    timeout 100 "$sanitizer" --tool memcheck --error-exitcode 9 "$PYTHON" -m pytest \
        -p no:cacheprovider -m gpu -q tests/test_gpu_jpeg_check.py -k "damaged or noise or random" \
        2>&1 | tail -n 20 | tee "$OUT/memcheck.txt" || true
else
    echo "compute-sanitizer: not found: no memcheck run" | tee "$OUT/memcheck.txt"
fi
