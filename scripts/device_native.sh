#!/usr/bin/env bash
# edgecli._native on the GPU host (from the repository root): every GPU test with it, then
# its whole-process A/B against the Python encoder and writer (benchmarks/png_native.py).
#
# The host cannot build it: `make install` on the development machine builds
# edgecli/_native.abi3.so in place (git ignores it), and the device call carries it, with the
# GPU decoders' wheels (WHEELS, default .whl; see ../shared/device-wheels) and bench_data
# (pan.mp4, pan_long.mp4; the q95 JPEGs are made here if missing). Each step fits one call:
#
#   OUT=/some/dir scripts/device_native.sh tests    # every GPU test, about 200 s
#   OUT=/some/dir scripts/device_native.sh ab       # the A/B, 5 rounds, about 300 s
#
# Writes $OUT/gpu_tests.txt or $OUT/png_native.txt and ends with their summary lines.
set -euo pipefail

STEP=${1:?usage: scripts/device_native.sh tests|ab}
source scripts/device_env.sh
"$PYTHON" -c "import sys, edgecli.native as n; print('png encoding and writing:', \
n.description()); sys.exit(0 if n.c else 'carry edgecli/_native.abi3.so (make install builds it)')"

case "$STEP" in
tests)
	"$PYTHON" -m pytest -p no:cacheprovider -m gpu tests -q -rfE --tb=short \
		> "$OUT/gpu_tests.txt" 2>&1 || true
	grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.txt" | cut -c1-300 | head -20 || true
	tail -n 1 "$OUT/gpu_tests.txt"
	;;
ab)
	[[ -d "$DATA/q95/jpeg" ]] || "$PYTHON" scripts/make_bench_media.py --out "$DATA/q95" \
		--frames 240 --only jpeg --jpeg-quality 95 > "$OUT/media.txt" 2>&1
	"$PYTHON" benchmarks/png_native.py --jpeg "$DATA/q95/jpeg" --clip "$DATA/pan.mp4" \
		--long "$DATA/pan_long.mp4" --roots /tmp /dev/shm --rounds 5 | tee "$OUT/png_native.txt"
	;;
*)
	echo "scripts/device_native.sh: unknown step $STEP (tests or ab)" >&2
	exit 2
	;;
esac
