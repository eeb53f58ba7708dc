#!/usr/bin/env bash
# Whole runs of this tree and of an earlier one, alternating, on the GPU host (from the
# repository root): whether a change pays, measured as a ratio within one call.
#
# The earlier tree is carried as a folder holding its `edgecli` package, its kernels (`cuda`:
# without them a run falls back to the CPU) and a build of its edgecli/_native.abi3.so (the
# host has no compiler for it), made on the development machine:
#
#   mkdir -p bench_data/ab_tree && git archive REV edgecli cuda | tar -x -C bench_data/ab_tree
#   git show REV:edgecli/_native.c > /tmp/n.c && cc -shared -fPIC -O3 -fwrapv -DNDEBUG \
#       -I"$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
#       -DPy_LIMITED_API=0x030B0000 /tmp/n.c -lz -ldl -lpthread \
#       -o bench_data/ab_tree/edgecli/_native.abi3.so
#   OUT=/some/dir scripts/device_ab.sh
#
# The input: FRAMES links (default 12,000) to the files of the folder FILES, or where FILES is
# not set to 240 1080p q95 JPEGs drawn here (make_bench_media.py), run with `--decode $DECODE`
# (default auto) into /dev/shm, ROUNDS rounds (default 3) of the earlier tree then this one.
# Each run checks that it imported its own tree (from /tmp, so that the working directory is
# on no run's path).
# Environment: OUT, DATA, PYTHON, WHEELS (scripts/device_env.sh), AB_TREE (bench_data/ab_tree),
# FILES, FRAMES, DECODE, ROUNDS.
set -u -o pipefail

source scripts/device_env.sh
AB_TREE=$(cd "${AB_TREE:-bench_data/ab_tree}" && pwd)
FRAMES=${FRAMES:-12000}
ROUNDS=${ROUNDS:-3}
SITE=${SITE:-/tmp/edgecli-site}
here=$PWD
media=$(mktemp -d /tmp/edgecli-ab-XXXXXX)
trap 'rm -rf "$media" /dev/shm/edgecli-ab-out' EXIT

if [[ -n ${FILES:-} ]]; then
    files=("$(cd "$FILES" && pwd)"/*)
    what="files of $FILES"
else
    "$PYTHON" scripts/make_bench_media.py --only jpeg --jpeg-quality 95 --out "$media" \
        > /dev/null || exit 1
    files=("$media"/jpeg/*.jpg)
    what="q95 JPEGs"
fi
mkdir -p "$media/links"
for ((i = 0; i < FRAMES; i++)); do
    file=${files[i % ${#files[@]}]}
    ln -s "$file" "$(printf "%s/links/%06d.%s" "$media" "$i" "${file##*.}")"
done
echo "== $FRAMES links to ${#files[@]} $what, --decode ${DECODE:-auto} into /dev/shm"
for ((round = 1; round <= ROUNDS; round++)); do
    for tree in "$AB_TREE" "$here"; do
        name=$([[ $tree == "$here" ]] && echo "this tree" || echo "earlier")
        rm -rf /dev/shm/edgecli-ab-out
        (
            cd /tmp || exit 1
            export PYTHONPATH="$tree:$SITE"
            "$PYTHON" -c "import edgecli, sys; assert edgecli.__file__.startswith(sys.argv[1])" \
                "$tree" || exit 1
            start=$(date +%s.%N)
            "$PYTHON" -m edgecli run "$media/links" -o /dev/shm/edgecli-ab-out -q \
                --decode "${DECODE:-auto}" --json-summary "$media/summary.json" || exit 1
            end=$(date +%s.%N)
            "$PYTHON" - "$media/summary.json" "$start" "$end" "$round" "$name" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"round {sys.argv[4]} {sys.argv[5]:9}: {summary['frames'] / wall:6.0f} fps "
      f"(wall {wall:.2f} s) on {summary['backend']}, {summary['decoders']}; "
      f"bottleneck: {summary['bottleneck']}")
PY
        ) 2>&1 | tee -a "$OUT/device_ab.log"
    done
done
