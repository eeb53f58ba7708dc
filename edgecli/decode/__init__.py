"""Decoding: files and videos to the contract's frames, on the CPU and on the GPU.

:mod:`.cpu` decodes on the CPU (OpenCV, imageio) and reads sizes from headers; :mod:`.plan`
decides which decoder decodes what (``--decode auto|cpu|gpu``; no CuPy); :mod:`.engines` opens
the GPU's decoding libraries (nvJPEG through :mod:`.nvjpeg`, NVDEC through PyNvVideoCodec);
:mod:`.gpu` runs the GPU's decoders into batches on the device. What makes their frames the
CPU's, bit for bit: :mod:`.jpeg_header` reads a JPEG's header, :mod:`.jpeg_planes` turns its
planes into BGR as libjpeg-turbo does; :mod:`.streams` describes a video's stream as cv2 sees
it (its file: :mod:`.mp4`, :mod:`.matroska`; its codec's headers: :mod:`.h264`, :mod:`.hevc`,
:mod:`.vp9`, :mod:`.av1`, read bit by bit with :mod:`.bits`), :mod:`.yuv` is swscale's YUV to
BGR, and :mod:`.nvdec` plans from both how NVDEC's frames become cv2's. Which frames a run
has is :mod:`edgecli.inputs.sources`'. Nothing here is imported by ``import edgecli``.
"""
