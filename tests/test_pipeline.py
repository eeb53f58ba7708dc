"""The pipeline's GPU path (batching, the slab ring, ordering) with a stand-in backend.

The stand-in computes with the CPU reference but behaves like the CUDA backend: frames go
in batches to a ring of slabs, results come back asynchronously and out of step with
submission. So ordering, naming, batching and bounded memory are tested on any machine;
the real CUDA backend runs the same code in tests/test_gpu.py.
"""

from __future__ import annotations

import csv
import threading
import time
import weakref

import cv2
import numpy as np
import pytest

import edgecli
from edgecli import pipeline
from edgecli.edges.backends import BackendChoice
from edgecli.errors import FrameError
from edgecli.inputs.sources import Frame, ImageSource
from edgecli.output.timing import StageClock, WaitClock
from edgecli.pipeline import runner as runner_module
from edgecli.pipeline import writer as writer_module
from edgecli.workers import PriorityPool

from .helpers import invoke, make_frames
from .media import photo, write_video
from .oracle import plain_edges
from .standins import StandInGpuBackend


@pytest.fixture
def fake_gpu(monkeypatch):
    """The GPU path on a stand-in backend. Gives a function returning the batch sizes
    submitted so far; afterwards, checks every staged frame and every slab was released."""
    backends: list[StandInGpuBackend] = []

    def select(options, small=False):  # (the stand-in whatever the run's size)
        # Batches finish up to 2 ms late, at random: out of step with submission.
        backends.append(StandInGpuBackend(options, max_delay_s=0.002))
        return BackendChoice(backends[-1], None)

    monkeypatch.setattr(runner_module, "select_backend", select)
    rings = lambda: [ring for backend in backends for ring in backend.rings]  # noqa: E731
    yield lambda: [size for ring in rings() for size in ring.batch_sizes]
    for ring in rings():
        assert all(event.is_set() for event in ring.free), "a slab was never released"


@pytest.mark.parametrize("batch, streams", [(1, 1), (4, 1), (4, 2), (7, 3), (64, 2)])
def test_gpu_path_matches_cpu(fake_gpu, tmp_path, batch, streams):
    """Any batch size and stream count: every frame lands under its own name with the
    contract's pixels, for a frame count that is not a multiple of the batch."""
    shapes = [(20, 30)] * 11 + [(9, 13)] * 3 + [(20, 30)] * 5
    folder = make_frames(tmp_path / "in", shapes)
    summary = edgecli.process(folder, tmp_path / "out", batch=batch, streams=streams, workers=2)
    assert summary.frames == len(shapes) and summary.backend == "stand-in-gpu"
    assert summary.gpu_busy_fraction is not None
    assert {"upload", "kernel", "download"} <= set(summary.stages)
    assert set(summary.main_thread_waits_s) == {"decode", "submit", "gpu", "encode"}
    for i in range(len(shapes)):
        frame = cv2.imread(str(folder / f"f{i:03d}.png"))
        edges = cv2.imread(str(tmp_path / "out" / f"f{i:03d}.png"), cv2.IMREAD_GRAYSCALE)
        np.testing.assert_array_equal(edges, plain_edges(frame, 100, "l1", "replicate"))
    # A change of shape ends a batch; otherwise batches are full.
    expected = []
    for run in (11, 3, 5):
        expected += [batch] * (run // batch) + ([run % batch] if run % batch else [])
    assert fake_gpu() == expected


def test_gpu_path_video_order(fake_gpu, tmp_path):
    """Video frames keep their indices through batching."""
    frames = [photo(16, 24, seed=i) for i in range(9)]
    decoded = write_video(tmp_path / "clip.avi", frames)
    edgecli.process(tmp_path / "clip.avi", tmp_path / "out", batch=4, streams=2)
    for i, frame in enumerate(decoded):
        edges = cv2.imread(str(tmp_path / "out" / f"clip_{i:06d}.png"), cv2.IMREAD_GRAYSCALE)
        np.testing.assert_array_equal(edges, plain_edges(frame, 100, "l1", "replicate"))


def test_frames_in_flight_are_bounded(tmp_path, monkeypatch):
    """Frames decoded but not yet written stay under the queue bounds, however many frames
    there are: memory is set by the window, not by the input's length."""
    folder = make_frames(tmp_path / "in", [(12, 12)] * 80)
    counts = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def counting(method, step):
        def wrapper(*args, **kwargs):
            result = method(*args, **kwargs)
            with lock:
                counts["now"] += step
                counts["peak"] = max(counts["peak"], counts["now"])
            return result

        return wrapper

    def slow_write(path, data, **kwargs):
        time.sleep(0.003)  # a slow disk: decoding runs ahead unless the queues hold it back
        real_write(path, data, **kwargs)

    real_write = writer_module.write_atomic
    monkeypatch.setattr(ImageSource, "decode", counting(ImageSource.decode, +1))
    monkeypatch.setattr(writer_module, "write_atomic", counting(slow_write, -1))
    edgecli.process(folder, tmp_path / "out", backend="cpu", workers=2, batch=3)
    window = pipeline.WINDOW_PER_WORKER * 2 + 3  # pipeline.run: per worker, plus a batch
    assert counts["now"] == 0
    assert 0 < counts["peak"] <= 2 * window + 2  # read-ahead + unwritten + the two workers'


def test_timings_csv(tmp_path):
    """--timings-csv writes one row per frame with a column per stage."""
    folder = make_frames(tmp_path / "in", [(10, 10)] * 4)
    target = tmp_path / "t.csv"
    edgecli.process(folder, tmp_path / "out", backend="cpu")
    pipeline.run(folder, tmp_path / "out2", edgecli.Options(backend="cpu"), timings_csv=target)
    rows = list(csv.DictReader(target.open()))
    assert sorted(r["frame"] for r in rows) == [f"f{i:03d}.png" for i in range(4)]
    assert set(rows[0]) == {"frame", "decode_ms", "compute_ms", "encode_ms", "write_ms"}
    assert all(float(r["decode_ms"]) >= 0 and float(r["write_ms"]) >= 0 for r in rows)


def test_slow_encoders_never_read_a_reused_slab(fake_gpu, tmp_path, monkeypatch):
    """Encoders slower than the GPU: a slab is reused only after its PNGs are all encoded,
    so every frame still gets its own pixels."""
    real_encode = writer_module.encode_png

    def slow_encode(edges, bits):
        time.sleep(0.004)  # the main thread runs ahead meanwhile
        return real_encode(edges, bits)

    monkeypatch.setattr(writer_module, "encode_png", slow_encode)
    shapes = [(20, 30)] * 40
    folder = make_frames(tmp_path / "in", shapes)
    edgecli.process(folder, tmp_path / "out", batch=2, streams=1, workers=2)
    for i in range(len(shapes)):
        frame = cv2.imread(str(folder / f"f{i:03d}.png"))
        edges = cv2.imread(str(tmp_path / "out" / f"f{i:03d}.png"), cv2.IMREAD_GRAYSCALE)
        np.testing.assert_array_equal(edges, plain_edges(frame, 100, "l1", "replicate"))


def test_a_batch_is_given_back_once_its_last_map_is_read(tmp_path, monkeypatch):
    """The encoders take a batch's maps in several tasks at once: the batch (its slab) is
    given back only once every map has been read, though the last task ends first; every
    PNG is written, and the progress counts each one."""
    frames = 3 * writer_module.FRAMES_A_TASK + 1
    read, written, released, counted = [], [], [], []

    def encode(edges, bits):
        if int(edges[0, 0]) < frames - 1:  # the last task, one map, ends first
            time.sleep(0.003)
        read.append(int(edges[0, 0]))
        return bytes(edges[0])

    monkeypatch.setattr(writer_module, "encode_png", encode)
    monkeypatch.setattr(writer_module, "write_atomic", lambda path, data, **_: written.append(data))
    maps = np.arange(frames, dtype=np.uint8).reshape(frames, 1, 1)
    with PriorityPool(4, "test") as pool:
        writer = writer_module.Writer(
            pool.at(0), tmp_path, edgecli.Options(), StageClock(), 64, counted.append
        )
        names = [f"f{i}.png" for i in range(frames)]
        writer.encode_batch(names, maps, lambda: released.append(len(read)))
        writer.drain()
    assert released == [frames]
    assert sorted(written) == [bytes([i]) for i in range(frames)]
    assert sum(counted) == frames


def test_finished_batches_go_to_the_encoders_before_their_stream_is_needed():
    """A batch the GPU has finished is handed to the encoders when the next batch starts,
    not only once every stream is busy: its slab comes free, and the encoders get its frames,
    sooner. Only names are kept in flight: a frame's pixels are in its slab."""
    options = edgecli.Options(batch=2, streams=4, workers=1)
    ring = StandInGpuBackend(options).slab_ring(options.streams + pipeline.SPARE_SLABS)
    batches = []
    real_submit = ring.submit

    def submit(filling, n):
        batches.append(real_submit(filling, n))
        return batches[-1]

    ring.submit = submit

    class Recorder:  # the writer: notes each frame handed over, done with its edges at once
        def __init__(self):
            self.names = []

        def encode_batch(self, names, edges, then):
            self.names.extend(names)
            then()

    writer = Recorder()
    handed_over = []  # frames handed to the encoders when frame i was asked for
    pixels = []  # weak references to each frame's pixels

    def frames():
        for i in range(6):
            if i == 4:  # the first batch (frames 0, 1) has long finished on the "GPU"
                assert batches[0].done.wait(10)
                assert all(ref() is None for ref in pixels[:2])  # freed once copied
            handed_over.append(list(writer.names))
            frame = Frame(f"f{i}.png", f"f{i}", np.full((4, 5, 3), i, np.uint8))
            pixels.append(weakref.ref(frame.pixels))
            yield frame

    with PriorityPool(1, "test") as pool:
        pipeline.run_on_gpu(ring, frames(), options, pool.at(0), StageClock(), writer, WaitClock())
    assert handed_over[5][:2] == ["f0.png", "f1.png"]  # with 3 of 4 streams busy
    assert writer.names == [f"f{i}.png" for i in range(6)]


class _NothingDecoded:
    """A decoded batch all of whose files failed on the CPU too: nothing to hand on."""

    names, errors, decoders = [], [], {}
    frames = np.zeros((0, 2, 2, 3), np.uint8)

    def discard(self):
        pass


@pytest.mark.parametrize("ahead", [0, 1, 2, 6])
def test_batches_decoded_on_the_gpu_are_taken_once_more_than_ahead_wait(ahead):
    """A GPU decoder keeps ``ahead`` batches decoding (its threads' worth) while the run hands
    the oldest on: the run waits for a batch only once more than that many are queued."""
    options = edgecli.Options(batch=2, streams=2, workers=1)
    ring = StandInGpuBackend(options).slab_ring(options.streams + pipeline.SPARE_SLABS)
    taken = []  # the batches whose result was asked for, when batch i was submitted

    class Decoding:
        def __init__(self, i):
            self.i, self.ahead = i, ahead

        def result(self):
            taken.append(self.i)
            return _NothingDecoded()

    queued = []

    def frames():
        for i in range(10):
            queued.append(list(taken))
            yield Decoding(i)

    with PriorityPool(1, "test") as pool:
        pipeline.run_on_gpu(ring, frames(), options, pool.at(0), StageClock(), None, WaitClock())
    for i, seen in enumerate(queued):
        assert seen == list(range(max(0, i - ahead))), i  # batch i - ahead - 1 waited for
    assert taken == list(range(10))


class Sequence:
    """A stand-in video: ``count`` frames from ``frames()``, which calls ``on_start`` when it
    starts, ``before_last`` before its last frame, and raises FrameError at ``broken_at``."""

    multi_frame = True

    def __init__(self, name, count, on_start=None, before_last=None, broken_at=None):
        self.name, self.count, self.broken_at = name, count, broken_at
        self.on_start, self.before_last = on_start, before_last
        self.made = 0  # frames decoded so far

    def frames(self, max_pixels):
        if self.on_start:
            self.on_start()
        for i in range(self.count):
            if i == self.broken_at:
                raise FrameError(self.name, "broken")
            if i == self.count - 1 and self.before_last:
                self.before_last()
            self.made += 1
            yield Frame(f"{self.name}_{i}.png", self.name, np.full((2, 2, 3), i, np.uint8))


def frame_reader(window=4, on_error="fail"):
    options = edgecli.Options(on_error=on_error)
    return pipeline.FrameReader(None, StageClock(), options, lambda name, pixels: True, window)


def test_the_next_video_is_opened_and_read_while_this_one_is():
    """Opening a video costs its reader about 130 ms on the H200 (a quarter of 240 frames'
    decoding): the next one is opened, and read ahead, while the one before is read."""
    opened = threading.Event()
    waited = []
    first = Sequence("a", 6, before_last=lambda: waited.append(opened.wait(2)))
    second = Sequence("b", 3, on_start=opened.set)
    third = Sequence("c", 2)
    names = [frame.out_name for frame in frame_reader().frames([first, second, third])]
    assert names == [f"a_{i}.png" for i in range(6)] + ["b_0.png", "b_1.png", "b_2.png"] + [
        "c_0.png",
        "c_1.png",
    ]
    assert waited == [True]  # b had started before a's last frame


def settled(count, at_least: int) -> int:
    """``count()`` once it has reached ``at_least`` and then not moved for 0.2 s (5 s at most):
    a slow machine may take its time to get there, but must not go past."""
    deadline = time.monotonic() + 5
    seen = count()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = count()
        if now == seen and now >= at_least:
            return now
        seen = now
    return seen


def test_the_next_video_reads_only_a_little_ahead_until_its_turn():
    """While one video is consumed, the next one's reader holds FOLLOWING_DEPTH frames (and
    the one it is handing over), not a window: a run of videos holds one window of frames.
    Once its turn comes, it reads a whole window ahead."""
    first, second = Sequence("a", 3), Sequence("b", 40)
    frames = frame_reader(window=12).frames([first, second])
    assert next(frames).out_name == "a_0.png"
    ahead = pipeline.FOLLOWING_DEPTH + 1  # queued, and the one it is handing over
    assert settled(lambda: second.made, ahead) == ahead
    assert [next(frames).out_name for _ in range(3)] == ["a_1.png", "a_2.png", "b_0.png"]
    assert settled(lambda: second.made, 14) == 1 + 12 + 1  # taken, queued, handing over
    assert [frame.out_name for frame in frames] == [f"b_{i}.png" for i in range(1, 40)]


def test_readers_stop_when_the_run_ends_early():
    """A video that fails ends the run; the next video's reader, started already and
    blocked on its full queue, is stopped rather than left running."""
    first = Sequence("a", 5, broken_at=3)
    second = Sequence("b", 50)
    reader = frame_reader(window=4)
    before = set(threading.enumerate())
    with pytest.raises(FrameError, match="broken"):
        list(reader.frames([first, second]))
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert set(threading.enumerate()) - before == set(), "a thread of the run is still running"
    assert second.made < 50  # stopped, not read to its end


def test_several_videos_keep_their_frames_and_names(fake_gpu, tmp_path):
    """Videos read ahead of their turn still come out in order, each frame under its name."""
    folder = tmp_path / "in"
    folder.mkdir()
    decoded = {}
    for k, count in enumerate([7, 1, 5]):
        frames = [photo(16, 24, seed=10 * k + i) for i in range(count)]
        decoded[f"clip{k}"] = write_video(folder / f"clip{k}.avi", frames)
    edgecli.process(str(folder / "*.avi"), tmp_path / "out", batch=3, streams=2, workers=2)
    outputs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert outputs == sorted(f"{c}_{i:06d}.png" for c, d in decoded.items() for i in range(len(d)))
    for clip, frames in decoded.items():
        for i, frame in enumerate(frames):
            png = tmp_path / "out" / f"{clip}_{i:06d}.png"
            edges = cv2.imread(str(png), cv2.IMREAD_GRAYSCALE)
            np.testing.assert_array_equal(edges, plain_edges(frame, 100, "l1", "replicate"))


def count_frames_in_flight(monkeypatch) -> dict:
    """Count the frames between the start of their decode and their PNG written (the
    still images' and, through ``Frame``, nothing else); returns the counts, with the peak."""
    counts = {"now": 0, "peak": 0}
    lock = threading.Lock()
    real_decode, real_write = ImageSource.decode, writer_module.write_atomic

    def decode(source, max_pixels):
        with lock:
            counts["now"] += 1
            counts["peak"] = max(counts["peak"], counts["now"])
        return real_decode(source, max_pixels)

    def write(path, data, **kwargs):
        time.sleep(0.01)  # a slow disk: decodes run ahead unless the budget holds them back
        real_write(path, data, **kwargs)
        with lock:
            counts["now"] -= 1

    monkeypatch.setattr(ImageSource, "decode", decode)
    monkeypatch.setattr(writer_module, "write_atomic", write)
    return counts


def flat_pngs(folder, count: int, side: int):
    """``count`` PNGs of side x side pixels that compress to almost nothing: large frames
    from small files."""
    folder.mkdir()
    for i in range(count):
        frame = np.full((side, side, 3), 40 * i, np.uint8)
        frame[side // 2 :, : side // 3] = 255
        cv2.imwrite(str(folder / f"f{i:03d}.png"), frame)
    return folder


def test_frames_in_flight_stay_within_the_memory_budget(tmp_path, monkeypatch):
    """Under --max-memory room for two frames (not for the six), the run completes, every
    frame written, with never more than two frames between decode and write."""
    from edgecli.pipeline.budget import HOST_BYTES_PER_PIXEL

    folder = flat_pngs(tmp_path / "in", 6, 600)
    frame_cost = 600 * 600 * HOST_BYTES_PER_PIXEL
    counts = count_frames_in_flight(monkeypatch)
    summary = edgecli.process(
        folder, tmp_path / "out", backend="cpu", workers=2, max_memory=int(2.5 * frame_cost)
    )
    assert summary.frames == 6 and summary.failed == []
    assert counts["now"] == 0 and 1 <= counts["peak"] <= 2
    for i in range(6):
        edges = cv2.imread(str(tmp_path / "out" / f"f{i:03d}.png"), cv2.IMREAD_GRAYSCALE)
        source = cv2.imread(str(folder / f"f{i:03d}.png"), cv2.IMREAD_COLOR)
        assert np.array_equal(edges, plain_edges(source, 100, "l1", "replicate"))


@pytest.mark.parametrize("kind", ["tiff", "gpu-path"])
def test_a_budget_for_one_frame_never_deadlocks(tmp_path, kind, fake_gpu):
    """Room for just one frame: multi-page files on their reader, and the GPU path with
    batches of 4, still run to the end (each frame waits for the one before it)."""
    from edgecli.pipeline.budget import DECODED_BYTES_PER_PIXEL, HOST_BYTES_PER_PIXEL

    if kind == "tiff":
        pages = [np.full((300, 300, 3), 60 * i, np.uint8) for i in range(4)]
        for name in ("a.tiff", "b.tiff"):
            (tmp_path / "in").mkdir(exist_ok=True)
            assert cv2.imwritemulti(str(tmp_path / "in" / name), pages)
        budget, expected, backend = int(1.5 * 300 * 300 * HOST_BYTES_PER_PIXEL), 8, "cpu"
    else:
        flat_pngs(tmp_path / "in", 6, 300)
        budget, expected, backend = int(1.5 * 300 * 300 * DECODED_BYTES_PER_PIXEL), 6, "auto"
    summary = edgecli.process(
        tmp_path / "in", tmp_path / "out", backend=backend, workers=2, batch=4, max_memory=budget
    )
    assert summary.frames == expected and summary.failed == []


def test_a_frame_larger_than_the_whole_budget_fails_naming_it(tmp_path):
    """A frame that could not fit even alone: exit 1, one Error line naming the file, what it
    needs and the budget; under skip, the frames that fit are written (exit 3)."""
    from edgecli.pipeline.budget import HOST_BYTES_PER_PIXEL

    folder = tmp_path / "in"
    folder.mkdir()
    cv2.imwrite(str(folder / "small.png"), np.zeros((10, 10, 3), np.uint8))
    cv2.imwrite(str(folder / "wide.png"), np.zeros((100, 2000, 3), np.uint8))
    args = ["run", folder, "-o", tmp_path / "out", "--backend", "cpu", "--max-memory", "1M"]
    result = invoke(*args)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {folder / 'wide.png'}: a frame this size needs "
        f"{100 * 2000 * HOST_BYTES_PER_PIXEL} bytes in flight, "
        "more than the memory budget of 1048576 bytes (raise it with --max-memory)\n"
    )
    result = invoke(*args, "--on-error", "skip", "-q")
    assert result.exit_code == 3
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["small.png"]


def test_a_stop_while_a_reader_waits_for_room_ends_the_run(tmp_path):
    """SIGINT (the stop event) while a video's reader waits for room under --max-memory: the
    run returns, interrupted, with its PNGs whole, rather than hanging on that wait."""
    from edgecli.options.params import Options
    from edgecli.pipeline.budget import HOST_BYTES_PER_PIXEL

    clip = tmp_path / "clip.avi"
    write_video(clip, [photo(240, 320, seed=i) for i in range(60)])
    stop = threading.Event()
    options = Options(
        backend="cpu", workers=2, max_memory=int(1.2 * 240 * 320 * HOST_BYTES_PER_PIXEL)
    )
    done: list = []
    runner = threading.Thread(
        target=lambda: done.append(pipeline.run(clip, tmp_path / "out", options, stop=stop)),
        daemon=True,
    )
    runner.start()
    while not list((tmp_path / "out").glob("*.png")) and runner.is_alive():
        time.sleep(0.01)
    stop.set()
    runner.join(timeout=30)
    assert not runner.is_alive(), "the run did not end after the stop"
    summary = done[0]
    assert summary.interrupted and 0 < summary.frames < 60
    assert len(list((tmp_path / "out").glob("*.png"))) == summary.frames


def test_a_cancelled_budget_ends_every_wait_for_room():
    """A reservation that waits for room returns once the budget is cancelled, and later
    ones do not wait at all."""
    from edgecli.pipeline.budget import FrameBudget

    budget = FrameBudget(100, 1)
    budget.reserve("a", 80, "a")
    waiter = threading.Thread(target=budget.reserve, args=("b", 50, "b"), daemon=True)
    waiter.start()
    time.sleep(0.05)
    assert waiter.is_alive()  # no room: it waits
    budget.cancel()
    waiter.join(timeout=5)
    assert not waiter.is_alive()
    budget.reserve("c", 90, "c")  # returns at once
