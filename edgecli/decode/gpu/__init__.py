"""Decoding on the GPU; every module here imports CuPy (:mod:`.convert`, :mod:`.inflate` and
:mod:`.png` only once they load their kernels), and is imported only when a run decodes on the GPU
(:func:`edgecli.decode.plan.plan`).

- :mod:`.decoders`: :class:`~.decoders.GpuDecoders`, the decoders of one run.
- :mod:`.jpeg`: JPEGs through nvJPEG (:mod:`edgecli.decode.nvjpeg`), in batches, on a thread.
- :mod:`.pngs`: PNGs through :mod:`.inflate` and :mod:`.png`, in batches, on threads.
- :mod:`.video`: videos through NVDEC (PyNvVideoCodec), several sessions at once.
- :mod:`.slots`: decoded batches and the ring of device buffers they are decoded into.
- :mod:`.convert`: ``cuda/decode.cu``, the decoders' planes to the contract's frames.
- :mod:`.inflate`: ``cuda/inflate.cu``, zlib streams inflated exactly or not at all.
- :mod:`.png`: ``cuda/png.cu``, PNGs' inflated scanlines to the contract's frames.
"""
