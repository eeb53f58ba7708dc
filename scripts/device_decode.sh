#!/usr/bin/env bash
# Issue 38's GPU work in one call on the GPU host (from the repository root): the GPU decoding
# tests, what NVDEC returns for every test clip (benchmarks/nvdec_order.py: count, order,
# exactness, which decides edgecli.decode.nvdec.ORDER_CHECKED), and the camera rows of the GPU
# decode benchmark beside the untagged clips (benchmarks/gpu_decode.py).
#
# The host has no video encoder: bench_data/pan.mp4, pan_head.mp4, pan_bt709.mp4,
# pan_hevc.mp4 and pan_rot90.mp4 (about 12 MB at 1080p, `make_bench_media.py --only video`)
# are made elsewhere and carried; the JPEG folder the benchmark warms up on is made here.
#
#   OUT=/some/dir scripts/device_decode.sh
#
# Environment: OUT (default bench_out), DATA (bench_data), FRAMES (2400: 10 clips a row),
# KINDS (clips,bt709,hevc,rotated), PYTHON (python3).
set -euo pipefail

OUT=${OUT:-bench_out}
DATA=${DATA:-bench_data}
FRAMES=${FRAMES:-2400}
KINDS=${KINDS:-clips,bt709,hevc,rotated}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

{
    echo "== GPU decoding tests"
    "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider -o addopts="" \
        tests/test_gpu_decode.py tests/test_gpu_decode_pipeline.py || true
    echo "== NVDEC's frames of the test clips"
    "$PYTHON" benchmarks/nvdec_order.py tests/data/nvdec_* tests/data/pan_h264.mp4 || true
    echo "== the camera rows"
    [[ -d "$DATA/q95/jpeg" ]] || "$PYTHON" scripts/make_bench_media.py --only jpeg \
        --jpeg-quality 95 --out "$DATA/q95"
    "$PYTHON" benchmarks/gpu_decode.py --data "$DATA" --jpeg "$DATA/q95/jpeg" \
        --frames "$FRAMES" --kinds "$KINDS" --json "$OUT/gpu_decode.json"
} 2>&1 | tee "$OUT/device_decode.log"
