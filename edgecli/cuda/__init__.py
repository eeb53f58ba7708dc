"""The CUDA side: what compiles, loads and launches the kernels, whose sources (``edges.cu``,
``decode.cu``, ...) are the checkout's top-level ``cuda/`` (``edgecli/kernels/`` in a wheel).
Importing this package imports nothing; the modules that import CuPy are imported only when a
run uses the GPU.

- :mod:`.kernel`: the edge kernel's variants, ``-D`` definitions, sources and cache keys (no
  CuPy).
- :mod:`.check`: ``make kernel-check``, every variant through NVRTC, no GPU needed (no CuPy).
- :mod:`.driver`: the CUDA driver started early, on a thread of its own (standard library).
- :mod:`.build`: NVRTC compilation for the device at hand, the disk cache, loading (CuPy).
- :mod:`.backend`: :class:`~edgecli.cuda.backend.CudaBackend` and the typed launches (CuPy).
- :mod:`.ring`: the slab ring, pinned buffers and streams the pipeline batches through (CuPy).
"""
