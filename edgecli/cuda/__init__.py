"""Compiling and launching CUDA in general; importing this package imports nothing.

- :mod:`.compiling`: where the ``.cu`` sources are (the checkout's top-level ``cuda/``,
  ``edgecli/kernels/`` in a wheel), NVRTC's options, the architectures, the cache key (no CuPy).
- :mod:`.build`: NVRTC compilation for the device at hand, the disk cache, loading (CuPy).
- :mod:`.driver`: the CUDA driver started early, on a thread of its own (standard library).
- :mod:`.pinned`: page-locked host memory (CuPy).

What the kernels compute and how they are launched is their users': the edge kernels in
:mod:`edgecli.edges`, the decoders' in :mod:`edgecli.decode.gpu`.
"""
