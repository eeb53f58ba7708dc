# Sourced by the device_*.sh scripts (from the repository root): their common settings (OUT,
# made if missing, DATA and PYTHON, each where the environment does not set it), the checkout
# on PYTHONPATH, and installs the GPU decoders' wheels carried in $WHEELS (default .whl; see
# ../shared/device-wheels) into /tmp/edgecli-site, since nothing can be installed on the GPU
# host itself. Without wheels, the GPU decoding tests skip or fail with the reason. A benchmark
# run that stalls leaves every thread's stack in $OUT (BENCH_STALLS), which comes back.
OUT=${OUT:-bench_out}
DATA=${DATA:-bench_data}
PYTHON=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export BENCH_STALLS="$OUT"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/edgecli-site "$WHEELS"/*.whl
    export PYTHONPATH="/tmp/edgecli-site:$PYTHONPATH"
else
    echo "no wheels in $WHEELS: the GPU decoders (nvJPEG, PyNvVideoCodec) are not installed"
fi
