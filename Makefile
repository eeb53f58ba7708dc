# edgecli: set-up, demo, tests and benchmarks. `make demo` and `make test` do all set-up.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_OUT ?= demo_output

# The CUDA extra to install, from the driver's CUDA version that nvidia-smi reports:
# ",cuda13" for 13.x or newer, ",cuda12" for 12.x, nothing without a driver.
CUDA_EXTRA := $(shell nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' \
	| head -n 1 | awk '$$1 >= 13 { print ",cuda13"; exit } $$1 >= 12 { print ",cuda12" }')
HAVE_NVCC := $(shell command -v nvcc 2>/dev/null)

.PHONY: install demo test test-gpu lint kernel-check bench-kernel bench-kernel-ab bench-media bench-e2e bench-png \
	bench-png-threads bench-cpu sample-frames clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev$(CUDA_EXTRA)]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/edgecli run sample_frames -o $(DEMO_OUT)
	@echo "edge maps written to $(DEMO_OUT)/"

test: $(STAMP)
ifneq ($(HAVE_NVCC),)
	$(MAKE) kernel-check
else
	@echo "kernel-check skipped: no nvcc on PATH"
endif
	$(PY) -m pytest

test-gpu: $(STAMP)
	$(PY) -m pytest -m gpu

lint: $(STAMP)
	$(VENV)/bin/ruff check edgecli tests benchmarks scripts
	$(VENV)/bin/ruff format --check edgecli tests benchmarks scripts

kernel-check: $(STAMP)
	$(PY) -m edgecli.kernels --check

bench-kernel: $(STAMP)
	$(PY) benchmarks/kernel.py

# Kernel forms x blocks an SM, timed in interleaved rounds (GPU): A/B comparisons that see 2-3%.
bench-kernel-ab: $(STAMP)
	$(PY) benchmarks/kernel_ab.py

# Benchmark input: a 1080p H.264 pan, and JPEG/PNG folders of the same frames, in bench_data/.
bench-media: $(STAMP)
	$(PY) -m pip install --quiet imageio-ffmpeg scikit-image
	$(PY) scripts/make_bench_media.py

bench-e2e: $(STAMP)
	$(PY) benchmarks/e2e.py --json benchmarks/e2e.json

# 1-bit PNG encoding: edgecli's encoder against OpenCV's (CPU only).
bench-png: $(STAMP)
	$(PY) benchmarks/png_encode.py

bench-png-threads: $(STAMP)
	$(PY) benchmarks/png_threads.py sample_frames

# The CPU backend against a multiprocessing.Pool OpenCV script, 240 JPEGs, whole processes.
bench-cpu: $(STAMP)
	$(PY) benchmarks/cpu_vs_script.py

# Regenerates sample_frames/ and its expected hashes (needs scikit-image).
sample-frames: $(STAMP)
	$(PY) -m pip install --quiet scikit-image
	$(PY) scripts/make_sample_frames.py

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache .ruff_cache .hypothesis build *.egg-info
