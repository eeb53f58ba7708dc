"""Decoding on the GPU, and what it needs to match the CPU's frames bit for bit.

:mod:`.plan` decides which decoder decodes what (``--decode auto|cpu|gpu``; no CuPy);
:mod:`.gpu` runs the GPU's decoders (the JPEG engines through :mod:`.nvjpeg`, NVDEC through
PyNvVideoCodec) into batches on the device; :mod:`.jpeg_planes` reads a JPEG's header and
planes as libjpeg-turbo does, :mod:`.h264` a video stream's colour and layout, :mod:`.yuv`
swscale's YUV to BGR. The CPU's own decoders are OpenCV's and imageio's, in
:mod:`edgecli.sources`. Nothing here is imported by ``import edgecli``.
"""
