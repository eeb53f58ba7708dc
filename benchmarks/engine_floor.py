"""The GPU's decode engines alone, as a whole process: from this process's start (its start time
in /proc, Linux) to its last frame decoded into device memory, nothing else done — no colour
conversion, no kernel, no PNG. A whole ``edgecli run`` decodes the same frames the same way and
does all of that besides, so this bounds its whole-process figures (issue 18).

    python benchmarks/engine_floor.py jpeg DIR            # nvJPEG's JPEG engines, batches of 64
    python benchmarks/engine_floor.py video A.mp4 [B.mp4 ...] [--sessions 8]

JPEG: the files are read by 16 threads ahead of the engines and decoded to planar YCbCr, as
edgecli's own nvJPEG binding (edgecli/decode/nvjpeg.py, loaded alone: the standard library is
all it imports) does for edgecli. Video: PyNvVideoCodec's SimpleDecoder, NV12 in device memory;
one video is split into ``--sessions`` equal segments decoded side by side (each seeks to its
start), several are shared out to the sessions (each decoder reconfigured from video to
video), as edgecli's sessions do. The CUDA context is made on a thread of its own from the
start, beside the imports. Prints one JSON line: frames, seconds from the process's start to
the CUDA context, to the first frame, to the last, and fps = frames / last.
"""

import ctypes
import importlib.util
import json
import os
import queue
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
JPEG_BATCH = 64


def since_start() -> float:
    ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")


def load(relative: str):
    """One of edgecli's modules that import only the standard library, without the package
    (whose import brings NumPy)."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def jpeg_planes(data: bytes) -> list[tuple[int, int]]:
    """(width, height) of each component's plane in a baseline or progressive JPEG, from its
    SOF segment: libjpeg's ceil(image size * factor / largest factor)."""
    at = 2
    while at < len(data):
        marker, length = data[at + 1], struct.unpack(">H", data[at + 2 : at + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            height, width, count = struct.unpack(">HHB", data[at + 5 : at + 10])
            factors = [data[at + 11 + 3 * i] for i in range(count)]
            hmax = max(f >> 4 for f in factors)
            vmax = max(f & 15 for f in factors)
            return [(-(-width * (f >> 4) // hmax), -(-height * (f & 15) // vmax)) for f in factors]
        at += 2 + length
    raise ValueError("no SOF segment")


def jpeg_floor(folder: Path, marks: dict) -> int:
    nvjpeg = load("edgecli/decode/nvjpeg.py")
    nvjpeg.library()  # loaded beside the driver's start
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


def video_floor(videos: list[str], sessions: int, marks: dict) -> int:
    import PyNvVideoCodec as nvc

    def new_decoder(video: str):
        native = nvc.OutputColorType.NATIVE
        return nvc.SimpleDecoder(video, gpu_id=0, use_device_memory=True, output_color_type=native)

    marks["ready"].wait()
    jobs: queue.SimpleQueue = queue.SimpleQueue()
    if len(videos) == 1:
        first = new_decoder(videos[0])
        total = len(first)
        for k in range(sessions):
            jobs.put((videos[0], total * k // sessions, total * (k + 1) // sessions))
    else:
        first = None
        for video in videos:
            jobs.put((video, 0, None))
    counts, lock = [], threading.Lock()

    def session(decoder) -> None:
        marks["driver"].cuCtxSetCurrent(marks["context"])
        decoded = 0
        while True:
            try:
                video, start, stop = jobs.get_nowait()
            except queue.Empty:
                break
            if decoder is None:
                decoder = new_decoder(video)
            else:
                decoder.reconfigure_decoder(video)
            stop = len(decoder) if stop is None else stop
            if start:
                decoder.seek_to_index(start)
            index = start
            while index < stop:
                frames = decoder.get_batch_frames(min(16, stop - index))
                if not frames:
                    break
                with lock:
                    marks.setdefault("first", since_start())
                index += len(frames)
            decoded += index - start
        counts.append(decoded)

    threads = [
        threading.Thread(target=session, args=(first if i == 0 else None,)) for i in range(sessions)
    ]
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

    threading.Thread(target=context, daemon=True).start()
    kind, *rest = sys.argv[1:]
    sessions = 8
    if "--sessions" in rest:
        at = rest.index("--sessions")
        sessions = int(rest[at + 1])
        del rest[at : at + 2]
    if kind == "jpeg":
        frames = jpeg_floor(Path(rest[0]), marks)
    else:
        frames = video_floor(rest, sessions, marks)
    last = since_start()
    figures = {"frames": frames, "context_s": round(marks["context_s"], 3),
               "first_s": round(marks["first"], 3), "last_s": round(last, 3),
               "fps": round(frames / last, 1)}  # fmt: skip
    if kind != "jpeg":
        figures["sessions"] = sessions
    print(json.dumps(figures), flush=True)
    os._exit(0)  # the decoders' teardown is not the floor's


if __name__ == "__main__":
    main()
