#!/usr/bin/env bash
# Issue 38's GPU work in one call on the GPU host (from the repository root): the GPU decoding
# tests, what NVDEC returns for every test clip (benchmarks/nvdec_order.py: count, order,
# exactness, which decides edgecli.decode.nvdec.ORDER_CHECKED), and the camera rows of the GPU
# decode benchmark beside the untagged clips (benchmarks/gpu_decode.py).
#
# The host has no video encoder: bench_data/pan.mp4, pan_head.mp4, pan_bt709.mp4,
# pan_hevc.mp4 and pan_rot90.mp4 (about 12 MB at 1080p, `make_bench_media.py --only video`)
# are made elsewhere and carried, and so is bench_data/corpus where it is to be checked
# (`make_camera_corpus.py`, 1.5 MB: each of its clips is run with --decode cpu and auto, and
# the two runs' PNGs compared byte for byte); the JPEG folder the benchmark warms up on is made
# here.
#
#   OUT=/some/dir scripts/device_decode.sh
#
# Environment: OUT (default bench_out), DATA (bench_data), FRAMES (2400: 10 clips a row),
# KINDS (clips,bt709,hevc,rotated), CAMERA_ROUNDS (3: the alternating rounds into tmpfs that
# issue 38's ratios come from), PYTHON (python3).
set -euo pipefail

FRAMES=${FRAMES:-2400}
KINDS=${KINDS:-clips,bt709,hevc,rotated}
CAMERA_ROUNDS=${CAMERA_ROUNDS:-3}
source scripts/device_env.sh

{
    echo "== GPU decoding tests"
    "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider -o addopts="" \
        tests/test_gpu_decode.py tests/test_gpu_decode_pipeline.py || true
    echo "== NVDEC's frames of the test clips"
    "$PYTHON" benchmarks/nvdec_order.py tests/data/nvdec_* tests/data/pan_h264.mp4 || true
    if [[ -d "$DATA/corpus" ]]; then
        echo "== the camera corpus: NVDEC's frames, then --decode auto against cpu"
        "$PYTHON" benchmarks/nvdec_order.py "$DATA"/corpus/* || true
        mkdir -p "$OUT/corpus"
        for clip in "$DATA"/corpus/*; do
            name=$(basename "$clip")
            for decode in cpu auto; do
                rm -rf "$OUT/corpus/$name-$decode"
                "$PYTHON" -m edgecli run "$clip" -o "$OUT/corpus/$name-$decode" -q \
                    --decode "$decode" --on-error skip \
                    --json-summary "$OUT/corpus/$name-$decode.json" || true
            done
            same=$(cd "$OUT/corpus" && diff -q <(cd "$name-cpu" && sha1sum ./*.png 2>/dev/null) \
                <(cd "$name-auto" && sha1sum ./*.png 2>/dev/null) >/dev/null && echo equal \
                || echo DIFFERENT)
            decoders=$("$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1]))
print(s["decoders"], s.get("videos", {}))' "$OUT/corpus/$name-auto.json" 2>/dev/null || echo "-")
            echo "  $name: auto $same to cpu; $decoders"
            rm -rf "$OUT/corpus/$name-cpu" "$OUT/corpus/$name-auto"
        done
    fi
    echo "== the camera rows"
    [[ -d "$DATA/q95/jpeg" ]] || "$PYTHON" scripts/make_bench_media.py --only jpeg \
        --jpeg-quality 95 --out "$DATA/q95"
    "$PYTHON" benchmarks/gpu_decode.py --data "$DATA" --jpeg "$DATA/q95/jpeg" \
        --frames "$FRAMES" --kinds "$KINDS" --camera-rounds "$CAMERA_ROUNDS" \
        --json "$OUT/gpu_decode.json"
} 2>&1 | tee "$OUT/device_decode.log"
