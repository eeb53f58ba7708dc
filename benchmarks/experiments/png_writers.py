"""The probe that led to edgecli._native: how fast the GPU-decode path runs, in one process,
with the worker threads' PNG task done in other ways. Each run is ``edgecli.pipeline.run``
on 2400 frames with ``Writer.encode_write`` replaced:

- base: as the tree has it (at deb5dbf: the Python encoder, then ``write_atomic``);
- cwrite: one ctypes call a PNG into ``png_writers.c`` (deflate, chunks, open, write, close,
  rename; ctypes lets go of the GIL for the call);
- pyfew: the Python encoder with fewer steps (``os.writev`` of the chunks, string paths);
- writeonly: a ready PNG (the first frame's) written by ``write_atomic``, nothing encoded;
- pynowrite / cnowrite: the Python / C encoder, nothing written;
- noencode: neither.

Needs a GPU, the decoders' wheels and ``bench_data`` (pan.mp4, pan_long.mp4, q95/jpeg):

    gcc -O2 -shared -fPIC -o /tmp/png_writers.so benchmarks/experiments/png_writers.c -lz
    PNG_WRITERS_SO=/tmp/png_writers.so OUTROOT=/dev/shm ROUNDS=3 \\
        PYTHONPATH=. python3 benchmarks/experiments/png_writers.py

``VARIANTS`` and ``KINDS`` (space-separated) choose the ways and inputs. Frames/s, whole runs.
The C call's bytes are checked against the Python encoder's on the first 8 PNGs of each run.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import resource
import shutil
import struct
import sys
import threading
import time
import zlib
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
sys.path.insert(0, "benchmarks")
os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")

from common import symlink_folder, video_copies  # noqa: E402

import edgecli.pipeline.writer as writer_module  # noqa: E402
from edgecli.params import Options  # noqa: E402
from edgecli.pipeline import run  # noqa: E402
from edgecli.png import IEND_CHUNK, PNG_SIGNATURE, png_from_rows_1bit  # noqa: E402
from edgecli.sinks import write_atomic  # noqa: E402

library = ctypes.CDLL(os.path.abspath(os.environ["PNG_WRITERS_SO"]))
c_write = library.edgecli_png_write
c_write.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint32]
c_write.argtypes += [ctypes.c_char_p, ctypes.c_char_p]
c_write.restype = ctypes.c_int
c_bytes = library.edgecli_png_bytes
c_bytes.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint32]
c_bytes.argtypes += [ctypes.c_void_p, ctypes.c_size_t]
c_bytes.restype = ctypes.c_long

SCRATCH = Path("/tmp/png-writers")
SCRATCH.mkdir(exist_ok=True)
JPEG = SCRATCH / "jpeg"
if not JPEG.exists():
    symlink_folder(sorted(Path("bench_data/q95/jpeg").iterdir()), 2400, JPEG)
if (SCRATCH / "clips").exists():
    CLIPS = str(SCRATCH / "clips" / "pan_*.mp4")
else:
    CLIPS = video_copies(Path("bench_data/pan.mp4"), 10, SCRATCH / "clips")
ORIGINAL = writer_module.Writer.encode_write
checked: list[bool] = []
first_png: list[bytes] = []
per_thread = threading.local()


def cwrite(self, name, edges, done=None):
    try:
        rows = edges.rows
        if len(checked) < 8:
            out = np.empty(rows.nbytes + 4096, np.uint8)
            n = c_bytes(rows.ctypes.data, rows.nbytes, edges.width, len(rows), out.ctypes.data,
                        out.nbytes)  # fmt: skip
            checked.append(out[:n].tobytes() == png_from_rows_1bit(rows, edges.width))
        final = os.fsencode(self.out_dir / name)
        temp = final[: final.rfind(b"/") + 1] + b".edgecli-%d-%s.tmp" % (os.getpid(), name.encode())
        with self.clock.timed("write", name):
            failed = c_write(rows.ctypes.data, rows.nbytes, edges.width, len(rows), temp, final)
    finally:
        if done is not None:
            done()
    if failed:
        raise OSError(failed, f"{name}: the C writer failed")


def pyfew(self, name, edges, done=None):
    try:
        rows = edges.rows
        deflate = zlib.compressobj(-1, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
        a, b = deflate.compress(rows), deflate.flush()
    finally:
        if done is not None:
            done()
    head = struct.pack(">II5B", edges.width, len(rows), 1, 0, 0, 0, 0)
    ihdr = struct.pack(">I", 13) + b"IHDR" + head + struct.pack(">I", zlib.crc32(b"IHDR" + head))
    crc = zlib.crc32(b, zlib.crc32(a, zlib.crc32(b"IDAT")))
    parts = [PNG_SIGNATURE + ihdr + struct.pack(">I", len(a) + len(b)) + b"IDAT", a, b,
             struct.pack(">I", crc) + IEND_CHUNK]  # fmt: skip
    temp = f"{self.out_dir}/.edgecli-{os.getpid()}-{name}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        os.writev(fd, parts)
    finally:
        os.close(fd)
    os.replace(temp, f"{self.out_dir}/{name}")


def writeonly(self, name, edges, done=None):
    if not first_png:
        first_png.append(png_from_rows_1bit(edges.rows, edges.width))
    if done is not None:
        done()
    write_atomic(self.out_dir / name, first_png[0])


def pynowrite(self, name, edges, done=None):
    try:
        with self.clock.timed("write", name):
            png_from_rows_1bit(edges.rows, edges.width)
    finally:
        if done is not None:
            done()


def cnowrite(self, name, edges, done=None):
    try:
        rows = edges.rows
        if getattr(per_thread, "buffer", None) is None:
            per_thread.buffer = np.empty(rows.nbytes + 65536, np.uint8)
        buffer = per_thread.buffer
        with self.clock.timed("write", name):
            n = c_bytes(rows.ctypes.data, rows.nbytes, edges.width, len(rows),
                        buffer.ctypes.data, buffer.nbytes)  # fmt: skip
    finally:
        if done is not None:
            done()
    assert n > 0


def noencode(self, name, edges, done=None):
    if done is not None:
        done()


ALL = {"base": ORIGINAL, "cwrite": cwrite, "pyfew": pyfew, "writeonly": writeonly,
       "pynowrite": pynowrite, "cnowrite": cnowrite, "noencode": noencode}  # fmt: skip
CHOSEN = os.environ.get("VARIANTS", "base cwrite pyfew writeonly noencode").split()
VARIANTS = {name: ALL[name] for name in CHOSEN}
INPUTS = {"jpeg": str(JPEG), "clips": CLIPS, "long": "bench_data/pan_long.mp4"}
KINDS = os.environ.get("KINDS", "jpeg clips long").split()


def one(kind: str, variant: str, first_round: bool) -> float:
    out = Path(os.environ.get("OUTROOT", "/tmp")) / "png-writers-out"
    shutil.rmtree(out, ignore_errors=True)
    writer_module.Writer.encode_write = VARIANTS[variant]
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    try:
        run(INPUTS[kind], out, Options(decode="gpu"))
    finally:
        writer_module.Writer.encode_write = ORIGINAL
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    same = ""
    if variant in ("base", "cwrite", "pyfew") and first_round:
        digest = hashlib.sha256()
        for path in sorted(out.iterdir()):
            digest.update(path.name.encode() + path.read_bytes())
        same = f" outputs {digest.hexdigest()[:12]}"
    print(f"{kind:6s} {variant:10s} {wall:6.3f} s {2400 / wall:7.0f} fps, "
          f"{cpu / wall:4.1f} cores{same}", flush=True)  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    return 2400 / wall


def main() -> None:
    one("jpeg", "base", False)  # warm: engines, kernel, caches
    one("clips", "base", False)
    rates: dict[tuple[str, str], list[float]] = {}
    for round_ in range(int(os.environ.get("ROUNDS", "3"))):
        for kind in KINDS:
            for variant in VARIANTS:
                rates.setdefault((kind, variant), []).append(one(kind, variant, round_ == 0))
    print("C bytes == Python bytes:", checked)
    print("\n| input | " + " | ".join(VARIANTS) + " |")
    for kind in KINDS:
        cells = []
        for variant in VARIANTS:
            xs = sorted(rates[(kind, variant)])
            cells.append(f"{xs[len(xs) // 2]:.0f} ({xs[0]:.0f}-{xs[-1]:.0f})")
        print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
