"""Decoding: files and videos to the contract's frames, on the CPU and on the GPU.

:mod:`.cpu` decodes on the CPU (OpenCV, imageio) and reads sizes from headers; :mod:`.plan`
decides which decoder decodes what (``--decode auto|cpu|gpu``; no CuPy); :mod:`.engines` opens
the GPU's decoding libraries (nvJPEG through :mod:`.nvjpeg`, NVDEC through PyNvVideoCodec);
:mod:`.gpu` runs the GPU's decoders into batches on the device. What makes their frames the
CPU's, bit for bit: :mod:`.jpeg_header` reads a JPEG's header, :mod:`.jpeg_planes` turns its
planes into BGR as libjpeg-turbo does, :mod:`.streams` describes a video's stream (from its
container: :mod:`.mp4`, :mod:`.matroska`; and its codec's headers: :mod:`.h264`, :mod:`.hevc`,
:mod:`.vp9`, :mod:`.av1`), :mod:`.nvdec` decides from that whether NVDEC gives cv2's frames,
and :mod:`.yuv` is swscale's YUV to BGR. Which frames a run has is :mod:`edgecli.sources`'.
Nothing here is imported by ``import edgecli``.
"""
