#!/usr/bin/env bash
# The GPU's check of JPEG scans (cuda/jpeg_check.cu) in one call on the GPU host (from the
# repository root), in about 6 minutes:
# 1. every GPU test (scripts/device_tests.sh), the check's among them, then the check's tests
#    of damaged files and lying plans under compute-sanitizer memcheck (where the host has it);
# 2. benchmarks/jpeg_scans.py on the q95 JPEGs: per file, the CPU's walk and plan against
#    cv2.imdecode; the check kernel alone on batches of 32 and 128 files (device events);
# 3. benchmarks/pays.py's JPEG row, FRAMES links to them into tmpfs at 16 cores, with the check
#    and without it (EDGECLI_GPU_SCAN_CHECK=0: every scan walked by the reading workers), in
#    ROUNDS alternating rounds.
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
# The CUDA toolkit's compute-sanitizer, where PATH does not name it.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
    /opt/nvidia/*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
if [[ -n "$sanitizer" ]]; then
    timeout 120 "$sanitizer" --tool memcheck --error-exitcode 9 "$PYTHON" -m pytest \
        -p no:cacheprovider -m gpu -q tests/test_gpu_jpeg_check.py -k "damaged or noise" \
        2>&1 | tail -n 20 | tee "$OUT/memcheck.txt" || true
else
    echo "compute-sanitizer: not found: no memcheck run" | tee "$OUT/memcheck.txt"
fi
[[ -d "$DATA/q95/jpeg" ]] || "$PYTHON" scripts/make_bench_media.py --out "$DATA/q95" \
    --frames 240 --only jpeg --jpeg-quality 95 > "$OUT/media.txt" 2>&1
"$PYTHON" benchmarks/jpeg_scans.py "$DATA/q95/jpeg" --rounds 0 2>&1 | tee "$OUT/jpeg_scans.txt"
"$PYTHON" benchmarks/pays.py --jpeg "$DATA/q95/jpeg" --rows jpeg --frames "$FRAMES" \
    --parts no-gpu-scan-check --rounds "$ROUNDS" --into tmpfs 2>&1 | tee "$OUT/pays_scans.txt"
