#!/usr/bin/env bash
# Issue 41's GPU work in one call on the GPU host (from the repository root), in under 10
# minutes: the GPU tests of the PNG path, the inflate kernel's fuzz tests under
# compute-sanitizer memcheck (where the host has it), then the PNG benchmark
# (benchmarks/png_decode.py: the CPU floor, whole runs of 2,400 and 12,000 frames with
# --decode cpu and gpu into tmpfs, outputs compared, the kernels alone, a table last) after
# the workers' reads alone by what becomes of the bytes (benchmarks/png_reads.py), and,
# where time is left, where a 12,000-frame --decode gpu run's threads spend their time
# (benchmarks/profile_run.py).
#
# The host has no FFmpeg, so the benchmark's frames are made elsewhere and carried:
# bench_data/png_ffmpeg, 12 frames of pan.mp4 as FFmpeg extracts them, 29 MB
# (`python benchmarks/png_decode.py --make-pngs`, or make bench-media). Carry also
# edgecli/_native.abi3.so (make install builds it) and the GPU decoders' wheels (WHEELS,
# default .whl; ../shared/device-wheels): test_gpu_decode_pipeline.py's JPEG tests need nvJPEG.
#
#   OUT=/some/dir scripts/device_png.sh
#
# Environment: OUT (default bench_out), DATA (bench_data), PYTHON (python3), WHEELS (.whl),
# RUNS (the whole runs' lengths, default "2400 12000"), TOTAL_S (560: the benchmark gets what
# the tests leave of it). Logs under $OUT; a short summary is printed last.
set -u -o pipefail

RUNS=${RUNS:-2400 12000}
TOTAL_S=${TOTAL_S:-560}
source scripts/device_env.sh
# A test file that fails to import is reported as an error, and the other files' tests still
# run. The host has no FFmpeg (imageio-ffmpeg) to write the PNGs of the tests named for it.
PYTEST=("$PYTHON" -m pytest -p no:cacheprovider -o addopts="" --continue-on-collection-errors)
TESTS=(tests/test_png_kernel.py tests/test_inflate.py tests/test_gpu_inflate.py
    tests/test_gpu_png_decode.py tests/test_gpu_decode_pipeline.py)

step() { echo; echo "=== $* ($SECONDS s) ==="; }

step "host"
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not available"
echo "nproc: $(nproc)"
"$PYTHON" -m edgecli info 2>&1 || echo "edgecli info failed"

step "GPU tests of the PNG path"
timeout 200 "${PYTEST[@]}" -m gpu -q -rfEs --tb=short -k "not written_by_ffmpeg" "${TESTS[@]}" \
    2>&1 | tee "$OUT/png_tests.txt"
tests_rc=$?

# The CUDA toolkit's compute-sanitizer, where PATH does not name it.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
    /opt/nvidia/*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1)
step "the fuzz tests (zlib streams, mutated PNGs) under compute-sanitizer memcheck"
if [[ -n "$sanitizer" ]]; then
    timeout 120 "$sanitizer" --tool memcheck --error-exitcode 9 "${PYTEST[@]}" -m gpu -q \
        tests/test_gpu_inflate.py tests/test_gpu_png_decode.py -k "corrupt or hand_made or mutated" \
        2>&1 | tail -n 40 \
        | tee "$OUT/memcheck.txt"
    memcheck_rc=$?
else
    echo "compute-sanitizer: not found (PATH, /usr/local/cuda*/bin, /opt/nvidia): no memcheck run" \
        | tee "$OUT/memcheck.txt"
    memcheck_rc=missing
fi

step "the reads, by what becomes of each file's bytes (benchmarks/png_reads.py)"
if [[ -d "$DATA/png_ffmpeg" ]]; then
    timeout 90 "$PYTHON" benchmarks/png_reads.py --pngs "$DATA/png_ffmpeg" 2>&1 \
        | tee "$OUT/png_reads.txt"
fi

step "the PNG benchmark"
left=$((TOTAL_S - SECONDS > 120 ? TOTAL_S - SECONDS : 120))
if [[ -d "$DATA/png_ffmpeg" ]]; then
    # A whole run starts only while there is time for it to run out its own limit (120 s) and
    # for the kernels' rows and the table after it.
    # shellcheck disable=SC2086  # RUNS is a list of lengths
    timeout "$left" "$PYTHON" benchmarks/png_decode.py --pngs "$DATA/png_ffmpeg" --runs $RUNS \
        --budget-s $((left - 200)) --run-timeout-s 120 --json "$OUT/png_decode.json" 2>&1 \
        | tee "$OUT/png_decode.txt"
    bench_rc=$?
else
    echo "$DATA/png_ffmpeg was not carried (benchmarks/png_decode.py --make-pngs makes it)" \
        | tee "$OUT/png_decode.txt"
    bench_rc=missing
fi

step "where a 12,000-PNG --decode gpu run's threads spend their time"
if [[ -d "$DATA/png_ffmpeg" ]] && ((TOTAL_S - SECONDS > 60)); then
    timeout $((TOTAL_S - SECONDS - 20)) "$PYTHON" benchmarks/profile_run.py "$DATA/png_ffmpeg" \
        --frames 12000 --decode gpu --json "$OUT/profile_png.json" > "$OUT/profile_png.txt" 2>&1
    head -n 1 "$OUT/profile_png.txt"
else
    echo "no time left (or no PNGs) for the profile"
fi

step "summary"
echo "GPU tests (exit $tests_rc): $(tail -n 1 "$OUT/png_tests.txt")"
echo "memcheck (exit $memcheck_rc): $(grep -h "ERROR SUMMARY" "$OUT/memcheck.txt" | tail -n 1) \
$(tail -n 1 "$OUT/memcheck.txt")"
echo "benchmark (exit $bench_rc; 1: a run failed or differed from --decode cpu's; 124: timed out)"
"$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["table"])' \
    "$OUT/png_decode.json" 2>/dev/null || echo "  no table: see $OUT/png_decode.txt"
echo "logs: $OUT/png_tests.txt, $OUT/memcheck.txt, $OUT/png_decode.txt, $OUT/png_decode.json"
