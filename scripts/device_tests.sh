#!/usr/bin/env bash
# Every GPU test on the GPU host (from the repository root), in one call of about 200 s: after
# a change to GPU code, or to the layout the GPU code is imported from.
#
# The host cannot build edgecli/_native.abi3.so: `make install` on the development machine
# builds it in place (git ignores it) and the call carries it, with the GPU decoders' wheels
# (.whl; see ../shared/device-wheels) and bench_data/pan.mp4.
#
#   OUT=/some/dir scripts/device_tests.sh
#
# Writes $OUT/gpu_tests.txt and ends with its failures and summary line.
set -euo pipefail

source scripts/device_env.sh
"$PYTHON" -c "import sys, edgecli.native as n; print('png encoding and writing:', \
n.description()); sys.exit(0 if n.c else 'carry edgecli/_native.abi3.so (make install builds it)')"
# A module that fails to import is an error in the summary, not the end of the run.
"$PYTHON" -m pytest -p no:cacheprovider -m gpu tests -q -rfE --tb=short \
    --continue-on-collection-errors \
    > "$OUT/gpu_tests.txt" 2>&1 || true
grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests.txt" | cut -c1-300 | head -20 || true
tail -n 1 "$OUT/gpu_tests.txt"
