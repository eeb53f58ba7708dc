"""Decoding: files and videos to the contract's frames, on the CPU and on the GPU.

:mod:`.cpu` decodes on the CPU (OpenCV, imageio) and reads sizes from headers; :mod:`.plan`
decides which decoder decodes what (``--decode auto|cpu|gpu``; no CuPy); :mod:`.gpu` runs the
GPU's decoders (the JPEG engines through :mod:`.nvjpeg`, NVDEC through PyNvVideoCodec) into
batches on the device; :mod:`.jpeg_planes` reads a JPEG's header and planes as libjpeg-turbo
does, :mod:`.h264` a video stream's colour and layout (:mod:`.mp4`: its file's boxes),
:mod:`.yuv` swscale's YUV to BGR. Which frames a run has is :mod:`edgecli.sources`'. Nothing
here is imported by ``import edgecli``.
"""
