#!/usr/bin/env bash
# The end-to-end benchmark of issue 4, as the GPU host runs it (from the repository root).
#
# The host has no H.264 encoder, so bench_data/pan.mp4 and bench_data/pan_head.mp4 are made
# elsewhere (`scripts/make_bench_media.py --only video`) and carried over; the JPEG and PNG
# folders (about 850 MB at 1080p) are made here, from the same photographs, in seconds.
# edgecli need not be installed: it runs as `python3 -m edgecli` from this checkout.
#
#   OUT=/some/dir scripts/device_e2e.sh [extra benchmarks/e2e.py options]
#
# Writes $OUT/e2e.json (every measurement) and $OUT/e2e.log (this whole output, which
# ends with the results table). Environment: OUT (default bench_out), DATA (bench_data),
# FRAMES (240: must match the carried video), PYTHON (python3).
set -euo pipefail

OUT=${OUT:-bench_out}
DATA=${DATA:-bench_data}
FRAMES=${FRAMES:-240}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

benchmark() {
    echo "== host"
    nvidia-smi -L || echo "nvidia-smi: not available"
    echo "nproc: $(nproc)"
    "$PYTHON" -m edgecli info || echo "edgecli info failed"
    for clip in pan.mp4 pan_head.mp4; do
        [[ -f "$DATA/$clip" ]] || echo "warning: $DATA/$clip not carried over; video is skipped"
    done
    echo "== JPEG and PNG frames from scikit-image's photographs"
    "$PYTHON" scripts/make_bench_media.py --out "$DATA" --frames "$FRAMES" --only jpeg --only png
    echo "== benchmark"
    "$PYTHON" benchmarks/e2e.py --data "$DATA" --json "$OUT/e2e.json" "$@"
}

# pipefail: the script exits with the benchmark's status, not tee's.
benchmark "$@" 2>&1 | tee "$OUT/e2e.log"
