#!/usr/bin/env bash
# The end-to-end benchmark of issue 4, as the GPU host runs it (from the repository root).
#
# The host has no H.264 encoder, so bench_data/pan.mp4 (and pan_head.mp4) are made elsewhere
# (`scripts/make_bench_media.py --only video`) and carried over; the JPEG (and PNG) folders
# are made here, from the same photographs, in seconds. edgecli need not be installed: it
# runs as `python3 -m edgecli` from this checkout.
#
#   OUT=/some/dir scripts/device_e2e.sh [extra benchmarks/e2e.py options]
#
# By default it measures where the cap is, in about 4-5 minutes on 16 cores: per kind
# (KINDS, default jpeg,video), the codec floor; the pipeline's own ceiling with a backend
# that costs nothing, on the CPU backend's path and on the GPU path (stand-in slab ring);
# edgecli on the GPU and on the CPU; all on long runs (LONG_FRAMES, default 2400: folders of
# symlinks cycling over the 240 frames, or 10 copies of pan.mp4; the CPU backend on
# LONG_FRAMES_CPU, default 480), with 240-frame runs subtracted for the steady rate; and
# profiles (PROFILE, default ceiling-gpu,gpu) of one more run of each, in-process. No course
# loop and no 40/400-frame RSS runs (the full runs' RSS over the short runs' stands in). It
# ends with a short table. FULL=1 runs the complete issue-4 benchmark instead (every kind,
# 240-frame runs, course loop, RSS runs). BUDGET_S (default 240): past it, repetitions,
# profiles and kinds not yet started are skipped, so that the run ends in time.
#
# Writes $OUT/e2e.json (every measurement) and $OUT/e2e.log (this whole output). Environment:
# OUT (default bench_out), DATA (bench_data), FRAMES (240: must match the carried video),
# PYTHON (python3), and those above.
set -euo pipefail

FRAMES=${FRAMES:-240}
KINDS=${KINDS:-jpeg,video}
LONG_FRAMES=${LONG_FRAMES:-2400}
LONG_FRAMES_CPU=${LONG_FRAMES_CPU:-480}
PROFILE=${PROFILE:-ceiling-gpu,gpu}
BUDGET_S=${BUDGET_S:-240}
source scripts/device_env.sh

if [[ -n "${FULL:-}" ]]; then
    KINDS=video,jpeg,png
    options=(--budget-s "${BUDGET_S}")
else
    options=(
        --kinds "$KINDS" --long-frames "$LONG_FRAMES" --long-frames-cpu "$LONG_FRAMES_CPU"
        --repeats 2 --profile "$PROFILE" --skip-course --skip-rss
        --budget-s "$BUDGET_S" --run-timeout-s 150
    )
fi

benchmark() {
    echo "== host"
    nvidia-smi -L || echo "nvidia-smi: not available"
    echo "nproc: $(nproc)"
    "$PYTHON" -m edgecli info || echo "edgecli info failed"
    if [[ ",$KINDS," == *,video,* ]]; then
        for clip in pan.mp4 pan_head.mp4; do
            [[ -f "$DATA/$clip" ]] || echo "warning: $DATA/$clip not carried over"
        done
    fi
    folders=()
    for kind in jpeg png; do
        if [[ ",$KINDS," == *,$kind,* ]]; then
            folders+=(--only "$kind")
        fi
    done
    if ((${#folders[@]})); then
        echo "== ${folders[*]} frames from scikit-image's photographs"
        "$PYTHON" scripts/make_bench_media.py --out "$DATA" --frames "$FRAMES" "${folders[@]}"
    fi
    echo "== benchmark: benchmarks/e2e.py ${options[*]} $*"
    "$PYTHON" benchmarks/e2e.py --data "$DATA" --json "$OUT/e2e.json" "${options[@]}" "$@"
}

# pipefail: the script exits with the benchmark's status, not tee's.
benchmark "$@" 2>&1 | tee "$OUT/e2e.log"
