"""The edge contract and its backends: ``detect(frames_bgr) -> edges`` over (N, H, W, 3) uint8.

:mod:`.backends` chooses one. On the CPU: :mod:`.reference` (the contract, the readable spec),
:mod:`.cpu` (the same bytes in the fastest exact OpenCV and NumPy ops) and :mod:`.canny`
(``--operator canny``). On the GPU, the kernels of the top-level ``cuda/`` launched by
:mod:`.cuda_backend` (:class:`~.cuda_backend.CudaBackend`), with their variants and geometry
(:mod:`.variants`, no CuPy), their loading (:mod:`.kernels`), the Canny launches
(:mod:`.cuda_canny`), the slab ring the pipeline batches through (:mod:`.ring`) and 1-bit PNGs'
zlib streams on the device (:mod:`.cuda_deflate`). Compiling in general is :mod:`edgecli.cuda`'s.
"""
