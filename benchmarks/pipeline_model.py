"""Can the pipeline's structure reach the codec floor? A model run, on any machine.

``edgecli.pipeline.run`` as it is (threads, windows, in-order hand-offs, batches, slab
ring), with decoding and encoding replaced by timed waits: each frame's decode and encode
needs ``--decode-ms`` and ``--encode-ms`` of one of ``--cores`` simulated cores, which all
busy decoders and encoders share (n busy threads progress at min(1, cores / n) each, as
under the OS scheduler). No real CPU is spent on codecs, so this machine's own core count
does not matter, only the structure and Python's per-frame overhead. The model's codec
floor is ``cores / (decode_ms + encode_ms)`` frames per ms. Far below it means the
structure caps the rate; near it, the cap of a real run is in costs the model leaves out
(Python and the GIL, memory traffic, CUDA calls).

    python benchmarks/pipeline_model.py                      # the H200's JPEG figures
    python benchmarks/pipeline_model.py --workers 8 --batch 32 --paths gpu
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from unittest import mock

import numpy as np

from edgecli import pipeline
from edgecli.params import Options
from edgecli.sources import Frame, ImageSource
from edgecli.testing import StandInGpuBackend
from edgecli.timing import Summary


class Cores:
    """``cores`` simulated cores, shared equally by the threads working at once."""

    def __init__(self, cores: int, jitter: float, slice_s: float = 0.002):
        self.cores, self.jitter, self.slice_s = cores, jitter, slice_s
        self.lock = threading.Lock()
        self.busy = 0
        self.rng = np.random.default_rng(0)

    def work(self, ms: float, python_us: float = 0.0) -> None:
        """``ms`` of a core, with the GIL released (as in OpenCV's codecs), after
        ``python_us`` of Python, with it held (as in the code around them)."""
        end = time.perf_counter() + python_us / 1e6
        while time.perf_counter() < end:
            pass
        with self.lock:
            self.busy += 1
            left = ms / 1e3 * (1 + self.jitter * (2 * self.rng.random() - 1))
        try:
            while left > 0:
                start = time.perf_counter()
                time.sleep(min(self.slice_s, left / min(1.0, self.cores / self.busy)))
                left -= (time.perf_counter() - start) * min(1.0, self.cores / self.busy)
        finally:
            with self.lock:
                self.busy -= 1


class NoCompute:
    """The CPU backend's path with a backend that computes nothing."""

    name, device_name, runs_on_host = "no-compute", "-", True

    def detect(self, frames: np.ndarray) -> np.ndarray:
        return np.zeros(frames.shape[:3], np.uint8)


def model_run(args, path: str, folder: Path, out: Path) -> Summary:
    cores = Cores(args.cores, args.jitter)
    pixels = np.zeros((8, 8, 3), np.uint8)

    def decode(source, max_pixels):
        cores.work(args.decode_ms, args.python_us)
        return Frame(source.out_name, str(source.path), pixels.copy())

    def encode(edges, bits):
        cores.work(args.encode_ms, args.python_us)
        return b""

    options = Options(workers=args.workers, batch=args.batch, streams=args.streams)
    if path == "host":
        backend = NoCompute()
    else:
        edges = np.zeros(pixels.shape[:2], np.uint8)
        backend = StandInGpuBackend(
            options, compute=lambda frames: [edges] * len(frames), poison=False
        )
    with (
        mock.patch.object(ImageSource, "decode", decode),
        mock.patch.object(pipeline, "encode_png", encode),
        mock.patch.object(pipeline, "write_atomic", lambda path, data: None),
    ):
        return pipeline.run(folder, out, options, backend=backend)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cores", type=int, default=16, help="simulated cores (16)")
    # The H200 host's JPEG figures at 16 threads: decode 1068 fps, encode + write 1340 fps.
    parser.add_argument("--decode-ms", type=float, default=16 / 1068 * 1e3)
    parser.add_argument("--encode-ms", type=float, default=16 / 1340 * 1e3)
    parser.add_argument("--jitter", type=float, default=0.2, help="service times vary ±this")
    parser.add_argument(
        "--python-us",
        type=float,
        default=0.0,
        help="Python run with the GIL held by each decode and each encode (µs)",
    )
    parser.add_argument("--frames", type=int, default=2400)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--streams", type=int, default=2)
    parser.add_argument("--paths", default="host,gpu", help="host, gpu or both")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    floor = args.cores / (args.decode_ms + args.encode_ms) * 1e3
    print(
        f"model: {args.cores} cores, decode {args.decode_ms:.1f} ms, encode {args.encode_ms:.1f} "
        f"ms per frame; codec floor {floor:.0f} fps; {args.workers} workers, batch "
        f"{args.batch}, {args.streams} streams, {args.frames} frames"
    )
    with tempfile.TemporaryDirectory(prefix="edgecli-model-") as scratch:
        folder = Path(scratch) / "in"
        folder.mkdir()
        for i in range(args.frames):  # never decoded: only their names and count matter
            (folder / f"f{i:05d}.jpg").write_bytes(b"\0")
        for path in args.paths.split(","):
            runs = [
                model_run(args, path, folder, Path(scratch) / f"out-{path}-{rep}")
                for rep in range(args.repeats)
            ]
            fps = statistics.median(run.fps for run in runs)
            waits = runs[-1].main_thread_waits_s
            print(
                f"{path} path: {fps:.0f} fps = {fps / floor:.2f} of the floor; "
                f"main thread waited (s): {waits}, run {runs[-1].wall_s:.1f} s"
            )


if __name__ == "__main__":
    main()
