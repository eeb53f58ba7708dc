"""Bad input, atomic outputs, resume and interrupts (CPU backend)."""

from __future__ import annotations

import errno
import os
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgecli
from edgecli import FrameError, InputError, OutputError, native
from edgecli.inputs.sources import classify
from edgecli.output.resume import MANIFEST_NAME

from .helpers import H264_CLIP, edgecli_command, invoke, make_folder
from .media import photo
from .oracle import plain_edges


def assert_outputs_whole(out: Path) -> list[str]:
    """Every PNG in ``out`` decodes completely and no temporary is left; return the names."""
    leftovers = [p.name for p in out.rglob("*") if p.suffix != ".png" and p.name != MANIFEST_NAME]
    assert leftovers == [], f"temporaries left: {leftovers}"
    names = sorted(p.name for p in out.rglob("*.png"))
    for name in names:
        assert cv2.imread(str(out / name), cv2.IMREAD_GRAYSCALE) is not None, name
    return names


def png_with_size(width: int, height: int) -> bytes:
    """A PNG whose header declares width x height but holds one tiny row of data."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\x00"))
        + chunk(b"IEND", b"")
    )


def truncated(ext: str) -> bytes:
    encoded = cv2.imencode(ext, photo(40, 40))[1].tobytes()
    return encoded[: len(encoded) // 2]


BAD_FILES = {
    "empty.png": (b"", "empty file"),
    "junk.jpg": (b"plain text, not a JPEG", "not a decodable image"),
    "cut.png": (truncated(".png"), "not a decodable image"),
    "cut_jpeg.jpg": (truncated(".jpg"), "not a decodable image"),
}


@pytest.fixture
def mixed_folder(tmp_path):
    folder = make_folder(tmp_path / "in", 4)
    for name, (content, _) in BAD_FILES.items():
        (folder / name).write_bytes(content)
    return folder


def test_skip_reports_each_bad_frame_and_exits_3(mixed_folder, tmp_path):
    """--on-error skip: every bad file named with its reason (even with -q), the rest
    written, exit 3."""
    out = tmp_path / "out"
    result = invoke("run", mixed_folder, "-o", out, "--backend", "cpu", "--on-error", "skip", "-q")
    assert result.exit_code == 3
    for name, (_, reason) in BAD_FILES.items():
        assert f"edgecli: skipped {mixed_folder / name}: {reason}" in result.stderr
    assert (
        result.stderr.splitlines()[-1] == f"Error: {len(BAD_FILES)} frame(s) skipped after errors"
    )
    assert assert_outputs_whole(out) == [f"frame_{i:04d}.png" for i in range(4)]


def test_skip_lists_failures_in_summary(mixed_folder, tmp_path):
    """The library's summary lists the skipped frames as {source, reason}."""
    summary = edgecli.process(mixed_folder, tmp_path / "out", backend="cpu", on_error="skip")
    assert summary.frames == 4
    failed = {Path(f["source"]).name: f["reason"] for f in summary.failed}
    assert set(failed) == set(BAD_FILES)
    assert all(BAD_FILES[name][1] in reason for name, reason in failed.items())


def test_fail_stops_without_partial_files(mixed_folder, tmp_path):
    """--on-error fail (default): exit 1 on the first bad frame; what was written is whole."""
    out = tmp_path / "out"
    result = invoke("run", mixed_folder, "-o", out, "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith(f"Error: {mixed_folder}/")
    assert_outputs_whole(out)


def test_unreadable_file(tmp_path, monkeypatch):
    """A file the user may not read is reported as such (simulated: tests may run as root)."""
    folder = make_folder(tmp_path / "in", 1)
    real_open = os.open

    def refusing_open(path, flags, *args, **kwargs):
        if str(path).endswith(".png"):  # the input frame (outputs are opened as .tmp)
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr("edgecli.inputs.sources.os.open", refusing_open)
    if native.c is not None:  # and where the C module reads the file, its open refuses too

        class Refusing:
            def __getattr__(self, name):
                return getattr(real_c, name)

            def read_walked(self, path):
                os.close(refusing_open(path, os.O_RDONLY))
                return real_c.read_walked(path)

        real_c = native.c
        monkeypatch.setattr(native, "c", Refusing())
    with pytest.raises(FrameError, match="frame_0000.png: permission denied"):
        edgecli.process(folder, tmp_path / "out", backend="cpu")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_for_real(tmp_path):
    """chmod 000: the frame is reported as not readable."""
    folder = make_folder(tmp_path / "in", 1)
    (folder / "frame_0000.png").chmod(0)
    with pytest.raises(FrameError, match="permission denied"):
        edgecli.process(folder, tmp_path / "out", backend="cpu")


def test_video_that_cannot_be_opened(tmp_path):
    """Random bytes named .mp4: one line saying it cannot be opened as a video."""
    (tmp_path / "clip.mp4").write_bytes(os.urandom(4096))
    result = invoke("run", tmp_path / "clip.mp4", "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {tmp_path / 'clip.mp4'}: cannot open as a video (unknown format or corrupt)\n"
    )


def test_video_that_ends_early(tmp_path):
    """A truncated MP4 whose index promises 24 frames: the shortfall is an error, and the
    frames before it are written whole."""
    data = H264_CLIP.read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: len(data) * 6 // 10])
    out = tmp_path / "out"
    result = invoke("run", tmp_path / "cut.mp4", "-o", out, "--backend", "cpu")
    assert result.exit_code == 1
    assert "video ended early: " in result.stderr and "of 24 frames decoded" in result.stderr
    assert len(assert_outputs_whole(out)) < 24


def test_absurd_header_is_refused_before_decoding(tmp_path):
    """A PNG declaring 100000 x 100000 pixels is refused from its header."""
    (tmp_path / "huge.png").write_bytes(png_with_size(100_000, 100_000))
    result = invoke("run", tmp_path / "huge.png", "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {tmp_path / 'huge.png'}: header declares 10000000000 pixels, over the limit "
        "of 268435456 (raise it with --max-pixels)\n"
    )


def test_max_pixels_option(tmp_path):
    """--max-pixels lowers the limit; a frame at the limit passes."""
    cv2.imwrite(str(tmp_path / "a.png"), photo(10, 10))
    ok = invoke("run", tmp_path / "a.png", "-o", tmp_path / "o1", "--max-pixels", 100, "-q")
    assert ok.exit_code == 0
    refused = invoke("run", tmp_path / "a.png", "-o", tmp_path / "o2", "--max-pixels", 99)
    assert refused.exit_code == 1 and "over the limit of 99" in refused.stderr


def test_mixed_frame_sizes_are_processed(tmp_path):
    """Frames of different sizes in one folder are each processed at their own size."""
    folder = tmp_path / "in"
    folder.mkdir()
    shapes = [(10, 12), (10, 12), (7, 30), (10, 12), (1, 5)]
    for i, shape in enumerate(shapes):
        cv2.imwrite(str(folder / f"f{i}.png"), photo(*shape, seed=i))
    edgecli.process(folder, tmp_path / "out", backend="cpu", batch=2)
    for i, shape in enumerate(shapes):
        frame = cv2.imread(str(folder / f"f{i}.png"))
        edges = cv2.imread(str(tmp_path / "out" / f"f{i}.png"), cv2.IMREAD_GRAYSCALE)
        assert edges.shape == shape
        np.testing.assert_array_equal(edges, plain_edges(frame, 100, "l1", "replicate"))


def test_output_folder_not_writable(tmp_path, monkeypatch):
    """An output folder without write permission is refused before any work."""
    monkeypatch.setattr("edgecli.output.sinks.os.access", lambda path, mode: False)
    with pytest.raises(OutputError, match="output folder is not writable"):
        edgecli.process(make_folder(tmp_path / "in", 1), tmp_path / "out", backend="cpu")


def test_output_below_a_file(tmp_path):
    """-o naming a folder below a regular file: one line saying it cannot be created."""
    (tmp_path / "file").write_text("x")
    folder = make_folder(tmp_path / "in", 1)
    result = invoke("run", folder, "-o", tmp_path / "file" / "sub", "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {tmp_path / 'file' / 'sub'}: cannot create output folder (Not a directory)\n"
    )


REPORTS = {"--timings-csv": "timings CSV", "--json-summary": "JSON summary",
           "--write-expected": "manifest"}  # fmt: skip


@pytest.mark.parametrize("option", REPORTS)
@pytest.mark.parametrize(
    "name, reason",
    [
        ("missing/report", "folder {tmp_path}/missing does not exist"),
        ("file/report", "Not a directory"),  # a folder that cannot be written into
        ("bad\ud800name", "its name is not valid in the file system's encoding"),
    ],
    ids=["missing-folder", "below-a-file", "unencodable-name"],
)
def test_report_that_cannot_be_written_fails_before_any_frame(tmp_path, option, name, reason):
    """A report that cannot be written: exit 1 and one line before any frame is read, no
    folder made (neither the report's nor the output folder), and the other report (valid)
    not left behind, not even empty."""
    (tmp_path / "file").write_text("x")
    other = "--json-summary" if option == "--timings-csv" else "--timings-csv"
    out, target = tmp_path / "out", tmp_path / name
    result = invoke("run", make_folder(tmp_path / "in", 3), "-o", out, "--backend", "cpu",
                    other, tmp_path / "other", option, target)  # fmt: skip
    assert result.exit_code == 1, result.output
    shown = str(target).encode("utf-8", "backslashreplace").decode()  # as stderr prints it
    because = reason.format(tmp_path=tmp_path)
    assert result.stderr == f"Error: {shown}: cannot write {REPORTS[option]} ({because})\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "in"]


def test_reports_are_written_whole_or_not_at_all(mixed_folder, tmp_path):
    """An earlier timings CSV is kept as it was when the JSON summary cannot be written,
    and when the run stops on a bad frame (exit 1); neither leaves a report (the manifest
    neither) or temporary."""
    old_csv = tmp_path / "old.csv"
    old_csv.write_text("earlier")
    good = make_folder(tmp_path / "good", 2)
    for folder, json_summary in ((good, tmp_path / "missing" / "s.json"),
                                 (mixed_folder, tmp_path / "s.json")):  # fmt: skip
        result = invoke("run", folder, "-o", tmp_path / "out", "--backend", "cpu",
                        "--timings-csv", old_csv, "--json-summary", json_summary,
                        "--write-expected", tmp_path / "g.json")  # fmt: skip
        assert result.exit_code == 1
        assert old_csv.read_text() == "earlier"
        left = sorted(p.name for p in tmp_path.iterdir() if p.name != "out")
        assert left == ["good", "in", "old.csv"]
    assert result.stderr.splitlines()[-1].startswith(f"Error: {mixed_folder}/")  # a bad frame


def test_disk_full_names_the_file_and_leaves_nothing_partial(tmp_path, monkeypatch):
    """ENOSPC while writing: exit 1 naming the file, no temporary or partial PNG left."""
    real_write = os.write

    def full_disk_write(fd, data):
        temporary = ".edgecli-" in os.readlink(f"/proc/self/fd/{fd}")
        if not (temporary and bytes(data[:4]) == b"\x89PNG"):  # not a PNG's (the run's record)
            return real_write(fd, data)
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    # The Python os calls, where a full disk can be staged (the C write's failures, and the
    # error each gives, are tests/test_files.py's).
    monkeypatch.setattr("edgecli.native.c", None)
    monkeypatch.setattr("edgecli.output.sinks.os.write", full_disk_write)
    out = tmp_path / "out"
    result = invoke("run", make_folder(tmp_path / "in", 3), "-o", out, "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {out}/frame_000")
    assert result.stderr.endswith(".png: cannot write (disk full)\n")
    assert [p.name for p in out.iterdir()] == [MANIFEST_NAME]


def test_skip_existing_resumes(tmp_path):
    """--skip-existing leaves existing outputs untouched, makes the missing ones, and the
    result equals a clean run."""
    folder = make_folder(tmp_path / "in", 6)
    clean, resumed = tmp_path / "clean", tmp_path / "resumed"
    edgecli.process(folder, clean, backend="cpu")
    edgecli.process(folder, resumed, backend="cpu")
    for i in (1, 4):
        (resumed / f"frame_{i:04d}.png").unlink()
    kept = resumed / "frame_0000.png"
    os.utime(kept, (1, 1))
    summary = edgecli.process(folder, resumed, backend="cpu", skip_existing=True)
    assert (summary.frames, summary.skipped_existing) == (2, 4)
    assert kept.stat().st_mtime == 1
    for png in clean.iterdir():
        assert (resumed / png.name).read_bytes() == png.read_bytes()


def test_skip_existing_on_a_video(tmp_path):
    """A video resumes too: only frames without an output are encoded."""
    edgecli.process(H264_CLIP, tmp_path, backend="cpu")
    for i in (0, 23):
        (tmp_path / f"pan_h264_{i:06d}.png").unlink()
    summary = edgecli.process(H264_CLIP, tmp_path, backend="cpu", skip_existing=True)
    assert (summary.frames, summary.skipped_existing) == (2, 22)


def test_stale_temporaries_are_cleaned(tmp_path):
    """Temporaries of a dead run are removed by the next run; a live process's are kept."""
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    (out / f".edgecli-{dead}-abc.tmp").write_bytes(b"partial")
    (out / f".edgecli-{os.getpid()}-live.tmp").write_bytes(b"in progress")
    edgecli.process(make_folder(tmp_path / "in", 1), out, backend="cpu")
    assert sorted(p.name for p in out.iterdir()) == [
        f".edgecli-{os.getpid()}-live.tmp",
        MANIFEST_NAME,
        "frame_0000.png",
    ]


def start_run(folder: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*edgecli_command(), "run", str(folder), "-o", str(out), "--backend", "cpu",
         "--workers", "1", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def wait_for_outputs(out: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if out.exists() and len(list(out.glob("*.png"))) >= count:
            return
        time.sleep(0.01)
    raise AssertionError("the run finished (or hung) before it could be interrupted")


@pytest.fixture(scope="module")
def slow_folder(tmp_path_factory):
    """Enough frames that one worker takes several seconds."""
    return make_folder(tmp_path_factory.mktemp("slow"), 400, shape=(240, 320))


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, name", [(signal.SIGINT, 130, "SIGINT"),
                                             (signal.SIGTERM, 143, "SIGTERM")])  # fmt: skip
def test_signal_stops_cleanly(slow_folder, tmp_path, sig, code, name):
    """SIGINT/SIGTERM: the run stops early, prints its summary and exits 130/143, leaving
    only whole PNGs."""
    out = tmp_path / "out"
    process = start_run(slow_folder, out)
    wait_for_outputs(out, 3, process)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stderr
    assert f"Error: interrupted by {name}; " in stderr and "; interrupted\n" in stderr
    written = assert_outputs_whole(out)
    assert 3 <= len(written) < 400


@pytest.mark.slow
def test_kill_and_resume_equals_clean_run(slow_folder, tmp_path):
    """SIGKILL mid-run, then --skip-existing: the output equals a clean run's, byte for byte."""
    out = tmp_path / "out"
    process = start_run(slow_folder, out)
    wait_for_outputs(out, 5, process)
    process.kill()
    process.communicate(timeout=60)
    partial = len(list(out.glob("*.png")))
    assert 5 <= partial < 400
    resumed = start_run(slow_folder, out, "--skip-existing", "--workers", "2", "-q",
                        "--json-summary", "-")  # fmt: skip
    stdout, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr
    assert '"skipped_existing": ' + str(partial) in stdout
    clean = tmp_path / "clean"
    edgecli.process(slow_folder, clean, backend="cpu")
    assert assert_outputs_whole(out) == sorted(p.name for p in clean.glob("*.png"))
    for png in clean.iterdir():
        assert (out / png.name).read_bytes() == png.read_bytes(), png.name


# A sitecustomize for the child process: the import of cv2, part of edgecli's start-up,
# waits until the test has sent its signal (or given up), so the signal surely comes then.
PAUSE_AT_CV2_IMPORT = """
import os, sys

class PauseAtCv2:
    def find_spec(self, name, path=None, target=None):
        if name == "cv2":
            sys.meta_path.remove(self)
            os.write(int(os.environ["EDGECLI_TEST_READY_FD"]), b"r")
            os.read(int(os.environ["EDGECLI_TEST_GO_FD"]), 1)
        return None

sys.meta_path.insert(0, PauseAtCv2())
"""


def test_sigint_while_starting_exits_130_quietly(tmp_path):
    """Ctrl-C while edgecli starts (importing OpenCV here): exit 130 and one line, no
    traceback, no click 'Aborted!', no output folder."""
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(PAUSE_AT_CV2_IMPORT)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    path = os.pathsep.join(filter(None, [str(tmp_path / "hook"), os.environ.get("PYTHONPATH")]))
    env = os.environ | {"PYTHONPATH": path, "EDGECLI_TEST_READY_FD": str(ready_w),
                        "EDGECLI_TEST_GO_FD": str(go_r)}  # fmt: skip
    out = tmp_path / "out"
    process = subprocess.Popen(
        [*edgecli_command(), "run", str(make_folder(tmp_path / "in", 1)), "-o", str(out),
         "--backend", "cpu"],
        env=env, pass_fds=(ready_w, go_r), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    os.close(ready_w)
    os.close(go_r)
    try:
        assert os.read(ready_r, 1) == b"r", "the child never imported cv2"
        process.send_signal(signal.SIGINT)
    finally:
        os.close(go_w)  # the child goes on, should the signal not have stopped it
        os.close(ready_r)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert stderr == "Error: interrupted by SIGINT while starting; nothing written\n"
    assert not out.exists()


def test_closed_stderr_does_not_stop_a_run(tmp_path):
    """With file descriptor 2 closed (2>&-) a run completes, exits 0, and writes the same
    PNGs as any run."""
    folder = make_folder(tmp_path / "in", 3)
    out = tmp_path / "out"
    result = subprocess.run(
        ["sh", "-c", 'exec "$@" 2>&-', "sh", *edgecli_command(), "run", str(folder), "-o",
         str(out), "--backend", "cpu"],
        stdout=subprocess.PIPE, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0
    edgecli.process(folder, tmp_path / "clean", backend="cpu")
    assert assert_outputs_whole(out) == sorted(p.name for p in (tmp_path / "clean").glob("*.png"))
    for png in (tmp_path / "clean").glob("*.png"):
        assert (out / png.name).read_bytes() == png.read_bytes(), png.name


def valid_files() -> dict[str, bytes]:
    frame = photo(16, 20)
    files = {
        ext: cv2.imencode(ext, frame)[1].tobytes()
        for ext in (".png", ".jpg", ".bmp", ".webp", ".tiff")
    }
    import imageio.v3 as iio

    files[".gif"] = iio.imwrite("<bytes>", np.stack([frame, frame[::-1]]), extension=".gif")
    return files


VALID = valid_files()


@settings(
    max_examples=int(os.environ.get("EDGECLI_FUZZ_EXAMPLES", 300)),
    derandomize="EDGECLI_FUZZ_EXAMPLES" not in os.environ,  # CI: the same cases every run
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    ext=st.sampled_from(sorted(VALID)),
    cut=st.integers(0, 4000),
    flips=st.lists(st.tuples(st.integers(0, 4000), st.integers(1, 255)), max_size=8),
    junk=st.binary(max_size=64),
)
def test_corrupt_bytes_never_crash(tmp_path, ext, cut, flips, junk):
    """Truncated, bit-flipped or junk-padded files either decode to 8-bit BGR or raise
    edgecli's FrameError/InputError: never another exception, never a crash.

    CI runs the same 300 cases every time; EDGECLI_FUZZ_EXAMPLES=N explores N random ones."""
    data = bytearray(VALID[ext])
    for position, mask in flips:
        data[position % len(data)] ^= mask
    data = bytes(data[: max(cut, 1)] if cut < len(data) else data) + junk
    path = tmp_path / f"fuzz{ext}"
    path.write_bytes(data)
    try:
        source = classify(path, "fuzz")
        frames = (
            [source.decode(10**6).pixels]
            if not source.multi_frame
            else [f.pixels for f in source.frames(10**6) if not isinstance(f, FrameError)]
        )
    except (FrameError, InputError):
        return
    for pixels in frames:
        assert pixels.dtype == np.uint8 and pixels.ndim == 3 and pixels.shape[2] == 3


def test_second_signal_exits_at_once(monkeypatch):
    """The first SIGINT asks the run to wind down; a second one exits at once with 130."""
    from edgecli.cli import run as cli

    exits = []
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    with cli.stop_on_signals() as (stop, received):
        handler = signal.getsignal(signal.SIGINT)
        handler(signal.SIGINT, None)
        assert stop.is_set() and received == [signal.SIGINT] and exits == []
        handler(signal.SIGINT, None)
        assert exits == [130]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_run_does_not_wait_for_its_progress_bar_total(tmp_path, monkeypatch):
    """The bar's total may need videos opened (cv2 takes 40-70 ms a non-MP4 clip); the run
    starts without it, and the count stops once the run is done."""
    from edgecli.pipeline import run, runner

    asked = []

    def slow_count(sources, stop=None):
        asked.append(stop.wait(30))  # True: the run ended while the count was still going
        return None

    monkeypatch.setattr(runner, "count_frames", slow_count)
    started = time.perf_counter()
    summary = run(H264_CLIP, tmp_path / "out", edgecli.Options(backend="cpu"), progress=True)
    assert time.perf_counter() - started < 20
    assert asked == [True]
    assert summary.frames == 24 and len(list((tmp_path / "out").glob("*.png"))) == 24


def test_the_progress_bar_gets_its_total_once_the_videos_are_counted(tmp_path, capsys):
    from edgecli.inputs.sources import discover
    from edgecli.pipeline.runner import _progress_bar

    sources = [*discover(str(H264_CLIP)), *discover(str(H264_CLIP))]
    bar = _progress_bar(sources, shown=True)
    shown, deadline = "", time.monotonic() + 30
    while "0/48" not in shown and time.monotonic() < deadline:
        time.sleep(0.01)
        shown += capsys.readouterr().err
    bar.update(5)
    bar.close()
    assert "0/48" in shown, shown


def test_warnings_under_a_progress_bar_get_lines_of_their_own(mixed_folder, tmp_path, capsys):
    """With the progress bar drawn, each skipped frame's warning starts a line of its own (the
    bar is cleared first), never glued after the bar's text."""
    from edgecli.pipeline import run

    def warn(message: str) -> None:
        print(f"edgecli: {message}", file=sys.stderr)

    options = edgecli.Options(backend="cpu", on_error="skip", workers=1)
    summary = run(mixed_folder, tmp_path / "out", options, progress=True, warn=warn)
    assert len(summary.failed) == len(BAD_FILES)
    shown = [line.split("\r")[-1] for line in capsys.readouterr().err.split("\n")]
    warnings = [line for line in shown if "skipped" in line]
    assert len(warnings) == len(BAD_FILES)
    assert all(line.startswith("edgecli: skipped ") for line in warnings), warnings
