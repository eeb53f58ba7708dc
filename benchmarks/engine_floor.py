"""The GPU's decode engines alone, as a whole process: from this process's start (its start time
in /proc, Linux) to its last frame decoded into device memory, nothing else done — no colour
conversion, no kernel, no PNG. A whole ``edgecli run`` decodes the same frames the same way and
does all of that besides, so this bounds its whole-process figures (issue 18).

    python benchmarks/engine_floor.py jpeg DIR            # nvJPEG's JPEG engines, batches of 64
    python benchmarks/engine_floor.py video A.mp4 [B.mp4 ...] [--sessions 8]

JPEG: the files are read by 16 threads ahead of the engines and decoded to planar YCbCr through
edgecli's own nvJPEG binding (edgecli/decode/nvjpeg.py), as edgecli does; what it imports is
imported while the CUDA context is made, which takes longer. Video: PyNvVideoCodec's
SimpleDecoder as edgecli's sessions use it (``--decoder threaded``: its ThreadedDecoder), NV12 in
device memory, in ``--sessions`` sessions that share the videos out and cut them at keyframes as
edgecli's do (``edgecli.decode.segments.Schedule``: each session's decoder reconfigured from
video to video, starting at a segment's first frame). The CUDA context is made on a thread of
its own from the start, beside the imports. Prints one JSON line: frames, seconds from the
process's start to the CUDA context, to the first frame, to the last, and fps = frames / last.
Then it ends as edgecli does (``os._exit``; each session lets its decoder go as it finishes, the
JPEG decoder stays open), so its whole-process wall time, which its parent measures
(``gpu_decode.py``), compares with a run's: the driver's teardown of a CUDA context alone takes
about 0.1 s after ``os._exit`` on the H200 host (benchmarks/RESULTS.md).
"""

import argparse
import ctypes
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from timeline import since_start  # noqa: E402

JPEG_BATCH = 64


def jpeg_planes(data: bytes) -> list[tuple[int, int]]:
    """(width, height) of each plane nvJPEG writes for the JPEG ``data``: Y, then Cb and Cr at
    their sampling (edgecli's own header reader, as its GPU path lays them out)."""
    from edgecli.decode.jpeg_header import parse_header
    from edgecli.decode.jpeg_planes import chroma_shape

    header = parse_header(data)
    width, height = header.width, header.height
    if header.subsampling == "gray":
        return [(width, height)]
    rows, columns = chroma_shape(header.subsampling, width, height)
    return [(width, height), (columns, rows), (columns, rows)]


def jpeg_floor(folder: Path, marks: dict) -> int:
    from edgecli.decode import nvjpeg

    nvjpeg.library()  # loaded, and edgecli's modules imported, while the driver starts
    paths = sorted(folder.iterdir())
    readers = ThreadPoolExecutor(16)
    files = readers.map(Path.read_bytes, paths)  # in order, read ahead of the engines
    first = next(files)
    planes = jpeg_planes(first)
    frame_bytes = sum(w * h for w, h in planes)
    marks["ready"].wait()
    driver = marks["driver"]
    driver.cuCtxSetCurrent(marks["context"])
    decoder = nvjpeg.BatchDecoder("hardware")
    base = ctypes.c_uint64()
    driver.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    assert driver.cuMemAlloc_v2(ctypes.byref(base), 2 * JPEG_BATCH * frame_bytes) == 0
    destinations = []
    for i in range(2 * JPEG_BATCH):
        at, components = base.value + i * frame_bytes, []
        for width, height in planes:
            components.append((at, width))
            at += width * height
        destinations.append(components)
    done, batch, half = 0, [first], 0
    for data in files:
        batch.append(data)
        if len(batch) == JPEG_BATCH:
            decoder.decode(batch, destinations[half : half + JPEG_BATCH], 0)
            if not done:
                driver.cuCtxSynchronize()
                marks["first"] = since_start()
            done, batch, half = done + len(batch), [], JPEG_BATCH - half
    if batch:
        decoder.decode(batch, destinations[half : half + len(batch)], 0)
        done += len(batch)
    driver.cuCtxSynchronize()
    return done


def video_floor(videos: list[str], sessions: int, marks: dict, threaded: bool = False) -> int:
    import PyNvVideoCodec as nvc

    from edgecli.decode.segments import Schedule, Segment, keyframes

    def new_decoder(video: str, start: int):
        native = nvc.OutputColorType.NATIVE
        if threaded:  # 32 frames decoded ahead, on a thread of its own
            return nvc.ThreadedDecoder(video, 32, gpu_id=0, use_device_memory=True,
                                       output_color_type=native, start_frame=start)  # fmt: skip
        return nvc.SimpleDecoder(video, gpu_id=0, use_device_memory=True, output_color_type=native)

    marks["ready"].wait()
    # Shared out and cut at keyframes as edgecli's sessions do (edgecli.decode.segments).
    schedule = Schedule(Segment(video) for video in videos)
    counts, lock = [], threading.Lock()

    def session() -> None:
        marks["driver"].cuCtxSetCurrent(marks["context"])
        decoder, decoded = None, 0
        while (segment := schedule.take()) is not None:
            video = segment.source
            if decoder is None:
                decoder = new_decoder(video, segment.start)
            elif threaded:
                decoder.reconfigure_decoder(video, segment.start)
            else:
                decoder.reconfigure_decoder(video)
            if segment.start and not threaded:  # a ThreadedDecoder starts where it is told
                decoder.seek_to_index(segment.start)
            schedule.started(segment, len(decoder), keyframes(Path(video)))
            index = segment.start
            while (end := schedule.claim(segment, index, 16)) > index:
                frames = decoder.get_batch_frames(end - index)
                if not frames:
                    break
                with lock:
                    marks.setdefault("first", since_start())
                index += len(frames)
            decoded += index - segment.start
            schedule.done(segment)
        counts.append(decoded)  # its decoder goes as it returns, as an edgecli session's does

    threads = [threading.Thread(target=session) for _ in range(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts)


def main() -> None:
    marks: dict = {"ready": threading.Event()}

    def context() -> None:
        driver = ctypes.CDLL("libcuda.so.1")
        device, handle = ctypes.c_int(), ctypes.c_void_p()
        assert driver.cuInit(0) == 0 and driver.cuDeviceGet(ctypes.byref(device), 0) == 0
        assert driver.cuDevicePrimaryCtxRetain(ctypes.byref(handle), device) == 0
        driver.cuCtxSetCurrent(handle)
        marks.update(driver=driver, context=handle, context_s=since_start())
        marks["ready"].set()

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=("jpeg", "video"))
    parser.add_argument("paths", nargs="+", help="a folder of JPEGs, or the videos")
    parser.add_argument("--sessions", type=int, default=8, help="NVDEC sessions (video)")
    parser.add_argument(
        "--decoder",
        choices=("simple", "threaded"),
        default="simple",
        help="PyNvVideoCodec's SimpleDecoder (edgecli's) or ThreadedDecoder",
    )
    args = parser.parse_args()
    threading.Thread(target=context, daemon=True).start()
    if args.kind == "jpeg":
        frames = jpeg_floor(Path(args.paths[0]), marks)
    else:
        frames = video_floor(args.paths, args.sessions, marks, threaded=args.decoder == "threaded")
    last = since_start()
    figures = {"frames": frames, "context_s": round(marks["context_s"], 3),
               "first_s": round(marks["first"], 3), "last_s": round(last, 3),
               "fps": round(frames / last, 1)}  # fmt: skip
    if args.kind == "video":
        figures.update(sessions=args.sessions, decoder=args.decoder)
    print(json.dumps(figures), flush=True)
    os._exit(0)  # as edgecli ends


if __name__ == "__main__":
    main()
