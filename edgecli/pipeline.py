"""The run: sources -> decode pool -> backend -> encode/write pool -> summary.

One thread pool does the host work (decode, encode, write; and the CPU backend's compute,
so every core computes). OpenCV and NumPy release the GIL in their heavy loops, so threads
scale over cores without copying frames between processes. Queues are bounded: at most
``window`` decoded frames and ``window`` unwritten edge maps exist at once, whatever the
number of frames.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .backends import select_backend
from .errors import OptionError
from .params import Options
from .sinks import encode_png, prepare_output_dir, remove_stale_temporaries, write_atomic
from .sources import Frame, count_frames, discover
from .timing import StageClock, Summary


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def decode_in_order(sources: list, pool: ThreadPoolExecutor, clock: StageClock, window: int):
    """Decoded frames in input order. Still images decode on the pool, ``window`` ahead;
    a video or multi-frame file decodes in order from its one reader, on this thread."""

    def decode(source) -> Frame:
        with clock.timed("decode"):
            return source.decode()

    pending: deque[Future] = deque()
    for source in sources:
        if source.multi_frame:
            frames = source.frames()
            while True:
                start = time.perf_counter()
                frame = next(frames, None)
                if frame is None:
                    break
                clock.record("decode", (time.perf_counter() - start) * 1e3)
                pending.append(_done(frame))
                while len(pending) >= window:
                    yield pending.popleft().result()
        else:
            pending.append(pool.submit(decode, source))
        while len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def same_shape_batches(frames: Iterable[Frame], size: int) -> Iterator[list[Frame]]:
    """Consecutive frames grouped up to ``size``; a change of frame shape ends a batch."""
    batch: list[Frame] = []
    for frame in frames:
        if batch and (len(batch) == size or frame.pixels.shape != batch[0].pixels.shape):
            yield batch
            batch = []
        batch.append(frame)
    if batch:
        yield batch


def refuse_overwriting_inputs(sources: list, out_dir: Path) -> None:
    for source in sources:
        if source.multi_frame:
            continue
        target = out_dir / source.out_name
        if target.exists() and target.resolve() == source.path.resolve():
            raise OptionError(
                f"{source.path}: the output would overwrite this input; "
                "choose another output folder"
            )


class _Writer:
    """Encode-and-write tasks on the pool, at most ``window`` outstanding."""

    def __init__(self, pool, out_dir: Path, options: Options, clock, window: int, on_done):
        self.pool, self.out_dir, self.options, self.clock = pool, out_dir, options, clock
        self.window, self.on_done = window, on_done
        self.pending: deque[Future] = deque()

    def encode_write(self, name: str, edges: np.ndarray) -> None:
        with self.clock.timed("encode"):
            data = encode_png(edges, self.options.png_bits)
        with self.clock.timed("write"):
            write_atomic(self.out_dir / name, data)

    def compute_encode_write(self, backend, frame: Frame) -> None:
        with self.clock.timed("compute"):
            edges = backend.detect(frame.pixels[np.newaxis])[0]
        self.encode_write(frame.out_name, edges)

    def submit(self, fn: Callable, *args) -> None:
        self.pending.append(self.pool.submit(fn, *args))
        while len(self.pending) > self.window:
            self._finish_oldest()

    def _finish_oldest(self) -> None:
        self.pending.popleft().result()  # re-raises a worker's error here
        self.on_done()

    def drain(self) -> None:
        while self.pending:
            self._finish_oldest()


def run(
    input_arg,
    output,
    options: Options,
    *,
    progress: bool = False,
    notify: Callable[[str], None] | None = None,
) -> Summary:
    """Process every frame INPUT names into PNGs in ``output``; return the summary."""
    started = time.perf_counter()
    sources = discover(input_arg, recursive=options.recursive)
    choice = select_backend(options)
    if choice.notice and notify:
        notify(choice.notice)
    backend = choice.backend
    out_dir = prepare_output_dir(Path(output))
    refuse_overwriting_inputs(sources, out_dir)
    remove_stale_temporaries(out_dir)

    clock = StageClock()
    workers = options.worker_count
    window = 2 * workers + options.batch
    bar = tqdm(
        total=count_frames(sources) if progress else None,
        disable=not progress,
        unit="frame",
        dynamic_ncols=True,
        leave=False,
    )
    megapixels = 0.0
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="edgecli") as pool:
        writer = _Writer(pool, out_dir, options, clock, window, lambda: bar.update(1))
        try:
            frames = decode_in_order(sources, pool, clock, window)
            if backend.runs_on_host:  # compute on every worker, frame by frame
                for frame in frames:
                    megapixels += frame.pixels.shape[0] * frame.pixels.shape[1] / 1e6
                    writer.submit(writer.compute_encode_write, backend, frame)
            else:
                for batch in same_shape_batches(frames, options.batch):
                    stacked = np.stack([f.pixels for f in batch])
                    megapixels += stacked.shape[0] * stacked.shape[1] * stacked.shape[2] / 1e6
                    start = time.perf_counter()
                    edges = backend.detect(stacked)
                    per_frame_ms = (time.perf_counter() - start) * 1e3 / len(batch)
                    for frame, frame_edges in zip(batch, edges, strict=True):
                        clock.record("compute", per_frame_ms)
                        writer.submit(writer.encode_write, frame.out_name, frame_edges)
            writer.drain()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            bar.close()
    stats = clock.stats()
    return Summary(
        frames=stats.get("write", {}).get("count", 0),
        failed=[],
        wall_s=time.perf_counter() - started,
        backend=backend.name,
        device=backend.device_name,
        params=options.edge_params() | {"png_bits": options.png_bits},
        workers=workers,
        output=str(out_dir),
        stages=stats,
        megapixels=megapixels,
    )
