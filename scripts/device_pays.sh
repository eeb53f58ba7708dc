#!/usr/bin/env bash
# Issue 39's "keep only what pays" in one call on the GPU host (from the repository root), in
# about 8 minutes: benchmarks/pays.py at 16 and 8 usable cores, 2,400-frame rows, into tmpfs,
# the GPU deflate and edgecli._native each on and off, and two settings tried beside them: a
# GIL switch interval of 0.5 ms (the main thread hands every frame on, and waits to win the GIL
# back from busy workers each time) and 8 NVDEC sessions instead of 4.
#
# Carry edgecli/_native.abi3.so (make install builds it), the GPU decoders' wheels (.whl) and
# bench_data/pan.mp4; the q95 JPEGs and pan_long.mp4 are made here.
#
#   OUT=/some/dir scripts/device_pays.sh
#
# Environment: OUT, DATA, PYTHON (device_env.sh), CORES ("16 8"), ROUNDS (3), ROWS (all four).
set -euo pipefail

CORES=${CORES:-16 8}
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-jpeg clips long jpeg-cpu}
source scripts/device_env.sh
[[ -d "$DATA/q95/jpeg" ]] || "$PYTHON" scripts/make_bench_media.py --out "$DATA/q95" \
    --frames 240 --only jpeg --jpeg-quality 95 > "$OUT/media.txt" 2>&1
[[ -f "$DATA/pan_long.mp4" ]] || "$PYTHON" scripts/make_bench_media.py --out "$DATA" \
    --long-copies 10 >> "$OUT/media.txt" 2>&1
# shellcheck disable=SC2086  # CORES and ROWS are lists
"$PYTHON" benchmarks/pays.py --jpeg "$DATA/q95/jpeg" --clip "$DATA/pan.mp4" \
    --long "$DATA/pan_long.mp4" --cores $CORES --rows $ROWS --rounds "$ROUNDS" --into tmpfs \
    --setting 'switch-0.5ms=import sys; sys.setswitchinterval(5e-4)' \
    --setting 'nvdec-8=import edgecli.decode.gpu.video as v; v.VIDEO_SESSIONS = 8' \
    2>&1 | tee "$OUT/pays.txt"
