# edgecli: set-up, demo, tests and benchmarks. `make demo` and `make test` do all set-up.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# What running needs (the demo), and on top of it what developing needs (the tests, lint,
# kernel-check's NVRTC wheels, the benchmarks): a demo on a CPU machine installs no GPU wheels.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
DEMO_OUT ?= demo_output

# The CUDA extra to install, from the driver's CUDA version that nvidia-smi reports: cuda13
# for 13.x or newer, cuda12 for 12.x or for a Volta GPU (compute capability 7.0: CUDA 13's
# NVRTC compiles for 7.5 and newer only), nothing without a driver.
CUDA_VERSION := $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' \
	| head -n 1)
OLDEST_GPU := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
	| sort -n | head -n 1)
CUDA_EXTRA := $(shell echo "$(CUDA_VERSION) $(OLDEST_GPU)" | awk '$$1 >= 13 && ($$2 == "" \
	|| $$2 >= 7.5) { print "cuda13"; exit } $$1 >= 12 { print "cuda12" }')
comma := ,
RUN_SPEC := .$(if $(CUDA_EXTRA),[$(CUDA_EXTRA)])
DEV_SPEC := .[dev,kernel-check$(addprefix $(comma),$(CUDA_EXTRA))]

.PHONY: install install-dev demo test test-gpu lint kernel-check bench-kernel bench-media \
	bench-e2e bench-canny bench-soak bench-jpeg-scans bench-png bench-png-threads \
	bench-pays bench-png-decode bench-png-reads bench-cpu bench-scale sample-frames clean \
	turbojpeg

$(RUN_STAMP): pyproject.toml setup.py edgecli/_native.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e "$(RUN_SPEC)"
	touch $@

$(DEV_STAMP): $(RUN_STAMP)
	$(PY) -m pip install --quiet -e "$(DEV_SPEC)"
	touch $@

install: $(RUN_STAMP)

install-dev: $(DEV_STAMP)

# tests/test_jpeg_planes.py reads a JPEG's planes through the system's libturbojpeg: install it
# where apt-get can (root on Debian or Ubuntu); elsewhere they skip, saying why (under CI: fail).
turbojpeg:
	@ldconfig -p 2>/dev/null | grep -q libturbojpeg || { [ "$$(id -u)" = 0 ] \
		&& command -v apt-get >/dev/null && apt-get update -qq \
		&& apt-get install -y -qq libturbojpeg0 >/dev/null 2>&1; } \
		|| echo "libturbojpeg not installed: the JPEG plane tests skip (fail under CI)"

demo: $(RUN_STAMP)
	$(VENV)/bin/edgecli run sample_frames -o $(DEMO_OUT)
	@echo "edge maps written to $(DEMO_OUT)/"

test: $(DEV_STAMP) turbojpeg
	$(MAKE) kernel-check
	$(PY) -m pytest

test-gpu: $(DEV_STAMP)
	$(PY) -m pytest -m gpu

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check edgecli tests benchmarks scripts
	$(VENV)/bin/ruff format --check edgecli tests benchmarks scripts

# Every variant for sm_70 ... sm_120 through NVRTC (from the kernel-check extra); no GPU needed.
kernel-check: $(DEV_STAMP)
	$(PY) scripts/kernel_check.py --check

# The kernel against a device copy, 1080p and 4K, and the persistent grid's sizes (GPU).
bench-kernel: $(DEV_STAMP)
	$(PY) benchmarks/kernel.py --blocks-per-sm

# Benchmark input: a 1080p H.264 pan, and JPEG/PNG folders of the same frames, in bench_data/.
# For the GPU-decoding rows also q95 JPEGs (bench_data/q95/jpeg) and pan_long.mp4, pan.mp4 ten
# times over (stream-copied), and for the long runs pan_long40.mp4 (40 times, 9,600 frames).
bench-media: $(DEV_STAMP)
	$(PY) -m pip install --quiet imageio-ffmpeg scikit-image
	$(PY) scripts/make_bench_media.py
	$(PY) scripts/make_bench_media.py --only jpeg --only png --jpeg-quality 95 --out bench_data/q95
	$(PY) scripts/make_bench_media.py --long-copies 10
	$(PY) scripts/make_bench_media.py --long-copies 40 --long-name pan_long40.mp4
	$(PY) benchmarks/png_decode.py --make-pngs

# The pipeline against the codec floor (CPU decoders), then the GPU-decoding rows: --decode
# cpu, auto and gpu on 2400 1080p frames of each kind, the OpenCV script, the engines' rates;
# then the long runs (12,000 JPEGs, 24 clips, a 9,600-frame video, into tmpfs and the disk)
# as ratios to the engines alone and to the OpenCV script.
bench-e2e: $(DEV_STAMP)
	$(PY) benchmarks/e2e.py --json benchmarks/e2e.json
	$(PY) benchmarks/gpu_decode.py --data bench_data --jpeg bench_data/q95/jpeg \
		--json benchmarks/gpu_decode.json
	$(PY) benchmarks/gpu_decode.py --long-runs --data bench_data --jpeg bench_data/q95/jpeg \
		--json benchmarks/gpu_decode_long.json

# Whole Canny runs beside Sobel runs (issue 42): 2400 q95 JPEGs and 10 clips (make bench-media),
# each operator's fps and their ratio, the Canny PNGs against the CPU backend's, the OpenCV
# scripts doing the same (GPU; CANNY_ARGS="--backend cpu --frames 48 --clips 1" anywhere).
bench-canny: $(DEV_STAMP)
	$(PY) benchmarks/canny_runs.py --json benchmarks/canny_runs.json $(CANNY_ARGS)

# The soak (issue 39): 30 consecutive whole runs of each kind (2400 JPEGs, 480 PNGs, 10 clips,
# pan_long.mp4; make bench-media) under a watchdog that dumps a stalled run's every thread's
# stack and kills it; the table and the stacks in bench_out/soak/. SOAK_ARGS: more options.
bench-soak: $(DEV_STAMP)
	$(PY) benchmarks/soak.py --data bench_data --out bench_out/soak $(SOAK_ARGS)

# What judging JPEG scans costs: the C walk per file against cv2.imdecode, and whole runs of
# the q95 folder (make bench-media) with and without it.
bench-jpeg-scans: $(DEV_STAMP)
	$(PY) benchmarks/jpeg_scans.py bench_data/q95/jpeg

# PNG decoding (issue 41) in one run, on 12 1080p frames of bench_data/pan.mp4 as FFmpeg
# extracts them (bench_data/png_ffmpeg, made by make bench-media): the CPU floor (cv2.imdecode,
# zlib, libdeflate, the unfilter; also on the frames as cv2.imwrite writes them), whole runs of
# 2,400 and 12,000 frames with --decode cpu and gpu into tmpfs, outputs compared, and the GPU's
# inflate and unfilter kernels alone; a table of ratios to the CPU runs last. The GPU's rows
# need a GPU (scripts/device_png.sh runs them there); elsewhere they are left out.
bench-png-decode: $(DEV_STAMP)
	$(PY) benchmarks/png_decode.py

# A run's reads of PNG frames alone, by what becomes of each file's bytes (freed, kept, pooled).
bench-png-reads: $(DEV_STAMP)
	$(PY) benchmarks/png_reads.py

# 1-bit PNG encoding: edgecli's encoder against OpenCV's (CPU only).
bench-png: $(DEV_STAMP)
	$(PY) benchmarks/png_encode.py

bench-png-threads: $(DEV_STAMP)
	$(PY) benchmarks/png_threads.py sample_frames

# What pays: whole runs with the GPU deflate and edgecli._native each on and off, on
# bench_data/ (make bench-media), into tmpfs.
bench-pays: $(DEV_STAMP)
	$(PY) benchmarks/pays.py

# Scale-out overhead: one process against two --shard processes and --scheduler local:2.
bench-scale: $(DEV_STAMP)
	$(PY) benchmarks/scale_out.py

# The CPU backend against a multiprocessing.Pool OpenCV script, 240 JPEGs, whole processes.
bench-cpu: $(DEV_STAMP)
	$(PY) benchmarks/cpu_vs_script.py

# Regenerates sample_frames/ and its expected hashes (needs scikit-image).
sample-frames: $(DEV_STAMP)
	$(PY) -m pip install --quiet scikit-image
	$(PY) scripts/make_sample_frames.py

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache .ruff_cache .hypothesis build *.egg-info \
		edgecli/*.so
