#!/usr/bin/env bash
# Issue 39's long runs and a short soak in one call on the GPU host (from the repository root).
#
# 1. The long runs (`benchmarks/gpu_decode.py --long-runs`): 12,000 1080p q95 JPEGs, 24 H.264
#    clips of 240 frames and one 9,600-frame H.264 video, `--decode cpu` (the reference) and
#    `auto` into tmpfs and into the disk, beside the engines alone (whole processes) and the
#    OpenCV script, as ratios; kinds not started within LONG_BUDGET_S are skipped.
# 2. A timeline of one long run (`benchmarks/timeline.py --spans`): what the workers, the
#    engines, the encoders and the main thread did, half a second a line, over 12,000 JPEGs.
# 3. The soak (`benchmarks/soak.py`): SOAK_RUNS consecutive runs of each kind (2400 JPEGs, 480
#    PNGs, 10 clips, pan_long.mp4), under the watchdog that dumps a stalled run's stacks; no
#    run starts after SOAK_BUDGET_S.
# 4. Where WALK_AGAINST names a build of an earlier edgecli/_native.c (made and carried like
#    this tree's), the walk of a JPEG's scans with it and with this tree's, one thread,
#    alternated (`benchmarks/jpeg_scans.py --against`), before the long runs.
#
# The host has no video encoder and no FFmpeg: only bench_data/pan.mp4 (3.3 MB at 1080p,
# `make_bench_media.py --only video`) is carried; pan_long.mp4 (10 copies) and pan_long40.mp4
# (40 copies, 9,600 frames, 133 MB: too large to carry) are stream-copied from it here in plain
# Python (scripts/concat_mp4.py), and the q95 JPEG and PNG folders drawn here in seconds.
#
#   OUT=/some/dir scripts/device_long.sh
#
# About 6 minutes on 16 cores. Writes $OUT/device_long.log (this whole output),
# $OUT/timeline.txt, $OUT/gpu_decode_long.json and $OUT/soak.tar.gz (the soak's table, every
# run, and the stacks and stderr of every run that went wrong); the two tables come last.
# Environment: OUT (default bench_out), DATA (bench_data), PYTHON (python3), LONG_BUDGET_S
# (360), SOAK_RUNS (5), SOAK_BUDGET_S (120), SOAK_INTO (disk), WALK_AGAINST (none); LONG_ARGS
# and SOAK_ARGS, more options for each (on a machine without a GPU: LONG_ARGS=--skip-gpu).
set -euo pipefail

LONG_BUDGET_S=${LONG_BUDGET_S:-360}
SOAK_RUNS=${SOAK_RUNS:-5}
SOAK_BUDGET_S=${SOAK_BUDGET_S:-120}
SOAK_INTO=${SOAK_INTO:-disk}
source scripts/device_env.sh

long_and_soak() {
    echo "== host"
    nvidia-smi -L || echo "nvidia-smi: not available"
    echo "nproc: $(nproc)"
    "$PYTHON" -m edgecli info || echo "edgecli info failed"
    [[ -f "$DATA/pan.mp4" ]] || { echo "error: $DATA/pan.mp4 not carried over"; return 1; }
    echo "== media: q95 JPEG and PNG folders, pan.mp4 10 and 40 times over"
    [[ -d "$DATA/q95/jpeg" && -d "$DATA/q95/png" ]] || "$PYTHON" scripts/make_bench_media.py \
        --only jpeg --only png --jpeg-quality 95 --out "$DATA/q95"
    "$PYTHON" scripts/make_bench_media.py --out "$DATA" --long-copies 10
    "$PYTHON" scripts/make_bench_media.py --out "$DATA" --long-copies 40 \
        --long-name pan_long40.mp4
    if [[ -n "${WALK_AGAINST:-}" ]]; then
        echo "== the walk of a JPEG's scans against $WALK_AGAINST (benchmarks/jpeg_scans.py)"
        "$PYTHON" benchmarks/jpeg_scans.py "$DATA/q95/jpeg" --rounds 0 \
            --against "$WALK_AGAINST" || true
    fi
    echo "== long runs: benchmarks/gpu_decode.py --long-runs"
    "$PYTHON" benchmarks/gpu_decode.py --long-runs --data "$DATA" --jpeg "$DATA/q95/jpeg" \
        --budget-s "$LONG_BUDGET_S" --json "$OUT/gpu_decode_long.json" ${LONG_ARGS:-} || true
    echo "== timeline of one long run: 12,000 JPEGs, --decode auto (benchmarks/timeline.py)"
    rm -rf /dev/shm/edgecli-timeline && mkdir -p /dev/shm/edgecli-timeline
    if "$PYTHON" -c 'import sys; sys.path.insert(0, "benchmarks")
from pathlib import Path
from common import symlink_folder
symlink_folder(sorted(Path(sys.argv[1]).iterdir()), 12000, Path(sys.argv[2]))' \
        "$DATA/q95/jpeg" /dev/shm/edgecli-timeline/in; then
        "$PYTHON" benchmarks/timeline.py --spans 0.5 run /dev/shm/edgecli-timeline/in \
            -o /dev/shm/edgecli-timeline/out -q --decode auto 2> "$OUT/timeline.txt" || true
        grep -v " begins$\| ends$" "$OUT/timeline.txt" || true
    fi
    rm -rf /dev/shm/edgecli-timeline
    echo "== soak: $SOAK_RUNS runs a kind"
    "$PYTHON" benchmarks/soak.py --data "$DATA" --runs "$SOAK_RUNS" --into "$SOAK_INTO" \
        --first-timeout-s 90 --floor-s 20 --budget-s "$SOAK_BUDGET_S" --out "$OUT/soak" \
        ${SOAK_ARGS:-} || true
    for stacks in "$OUT"/soak/*.stacks; do
        [[ -e "$stacks" ]] || continue
        echo "== $stacks (first 40 lines)"
        head -n 40 "$stacks"
    done
    echo "== the long runs"
    "$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["table"])' \
        "$OUT/gpu_decode_long.json" || echo "no long-run table"
    echo "== the soak"
    cat "$OUT/soak/soak.txt" || echo "no soak table"
}

# Only 8 files come back from the host: the soak's folder travels as one archive.
long_and_soak 2>&1 | tee "$OUT/device_long.log"
if [[ -d "$OUT/soak" ]]; then
    tar -czf "$OUT/soak.tar.gz" -C "$OUT" soak && rm -rf "$OUT/soak"
fi
