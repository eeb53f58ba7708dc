"""Hostile numbers and odd inputs to `edgecli run`, `preview` and `info`: each ends in a
documented exit code and one ``Error:`` line (or works, in memory that follows the input),
never in a traceback, and a value that is no number by the one rule of edgecli.options.numerals is
refused wherever it is given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from edgecli.cli.types import ByteSize
from edgecli.inputs.sources import discover_inputs
from edgecli.options.numerals import is_decimal, is_whole_number
from edgecli.options.params import (
    MAX_BATCH,
    MAX_DEVICE,
    MAX_SHEET_PIXELS,
    MAX_SHOWN,
    MAX_STREAMS,
    MAX_THRESHOLDS,
    MAX_WIDTH,
    max_workers,
    parse_scheduler,
)
from edgecli.options.shards import shard_of
from edgecli.pipeline.preview import check_sheet

from .helpers import edgecli_command, invoke, make_folder
from .media import photo, write_video

VIDEO_FRAMES = 10


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Path:
    """A folder of 3 images and a video of 10 frames beside it."""
    root = tmp_path_factory.mktemp("bounds")
    make_folder(root / "images", 3)
    write_video(root / "clip.avi", [photo(24, 32, seed=k) for k in range(VIDEO_FRAMES)])
    return root


def inputs(media: Path) -> list[Path]:
    return [media / "images", media / "clip.avi"]


def the_error(stderr: str) -> str:
    """The one ``Error:`` line of ``stderr``, which holds no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def test_numbers_are_ascii_digits_only():
    """The one rule: ASCII digits, and a point for decimals; nothing int() or float() would
    also read (other scripts' digits, superscripts, underscores, signs, exponents)."""
    for text in ["0", "7", "0042", "12345678901234567890"]:
        assert is_whole_number(text) and is_decimal(text)
    for text in ["1.5", ".5", "5."]:
        assert is_decimal(text) and not is_whole_number(text)
    for text in ["", "１００", "١٠", "²", "1_0", "+1", "-1", " 1", "1e3", "inf", "0x1", "1\n"]:
        assert not is_whole_number(text) and not is_decimal(text), text


@pytest.mark.parametrize(
    "option, value",
    [
        ("-t", "１００"),
        ("-t", "５%"),
        ("--shard", "０/２"),
        ("--workers", "４"),
        ("--workers", "1_0"),
        ("--batch", "４"),
        ("--streams", "４"),
        ("--max-pixels", "４"),
        ("--max-memory", "١٠G"),
        ("--max-memory", "1e9"),
        ("--start", "١٠"),
        ("--end", "1:３0"),
        ("--every", "²"),
        ("--frames", "٣"),
        ("--device", "４"),
        ("--scheduler", "local:４"),
        ("--scheduler", "tcp://h:８７８６"),
    ],
)
def test_run_refuses_numbers_in_other_digits(media, tmp_path, option, value):
    """Every numeric option of run refuses other scripts' digits (and underscores, exponents)
    with exit 2 and one line naming the value, before anything is written."""
    result = invoke("run", *inputs(media), "-o", tmp_path / "out", option, value)
    assert result.exit_code == 2, result.output
    assert value in the_error(result.stderr)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--samples", "４"],
        ["--frames", "٣"],
        ["--width", "４００"],
        ["-t", "４"],
        ["--start", "١٠"],
    ],
)
def test_preview_refuses_numbers_in_other_digits(media, tmp_path, args):
    """Every numeric option of preview follows the same rule as run's."""
    result = invoke("preview", *inputs(media), "-o", tmp_path / "s.png", *args)
    assert result.exit_code == 2, result.output
    assert args[1] in the_error(result.stderr)
    assert not (tmp_path / "s.png").exists()


def test_info_refuses_a_device_in_other_digits():
    """info --device follows the same rule."""
    result = invoke("info", "--device", "５")
    assert result.exit_code == 2 and "'５'" in the_error(result.stderr)


def test_ascii_sizes_still_read_exactly():
    """The ASCII forms --max-memory documents read as before, exactly (no float rounding)."""
    size = ByteSize()
    assert [size.convert(v, None, None) for v in ["512", "1.5K", "2m", "1GB", ".5T"]] == [
        512, 1536, 2 << 20, 1 << 30, 1 << 39,
    ]  # fmt: skip
    assert size.convert("10" * 20 + "T", None, None) == int("10" * 20) << 40


@pytest.mark.parametrize(
    "args, limit",
    [
        (["--batch", str(MAX_BATCH + 1)], MAX_BATCH),
        (["--batch", "1" + "0" * 30], MAX_BATCH),
        (["--streams", str(MAX_STREAMS + 1)], MAX_STREAMS),
        (["--device", str(MAX_DEVICE + 1)], MAX_DEVICE),
        (["--device", "0," + "9" * 30], MAX_DEVICE),
        (["--scheduler", f"local:{max_workers() + 1}"], max_workers()),
        (["--scheduler", "local:" + "9" * 30], max_workers()),
    ],
)
def test_run_bounds_what_would_take_memory_or_processes(media, tmp_path, args, limit):
    """A count that would size buffers, streams or processes by itself is a usage error
    naming its limit, at once."""
    started = time.monotonic()
    result = invoke("run", *inputs(media), "-o", tmp_path / "out", *args)
    assert result.exit_code == 2, result.output
    assert str(limit) in the_error(result.stderr)
    assert time.monotonic() - started < 10 and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--every", "1" + "0" * 30], 3 + 1),  # the images, and the video's frame 0
        (["--frames", "1" + "0" * 30], 3 + VIDEO_FRAMES),
        (["--end", "1" + "0" * 30], 3 + VIDEO_FRAMES),
        (["--end", "1" + "0" * 30 + "s"], 3 + VIDEO_FRAMES),
        (["--max-pixels", "1" + "0" * 30], 3 + VIDEO_FRAMES),
        (["--max-memory", "1" + "0" * 30 + "T"], 3 + VIDEO_FRAMES),
    ],
)
def test_huge_limits_work_in_memory_that_follows_the_input(media, tmp_path, args, expected):
    """A limit or a selection far past the input runs as the input allows: exit 0."""
    out = tmp_path / "out"
    result = invoke("run", *inputs(media), "-o", out, "--backend", "cpu", "-q", *args)
    assert result.exit_code == 0, result.output
    assert len(list(out.glob("*.png"))) == expected


@pytest.mark.parametrize(
    "args, limit",
    [
        (["--width", "100000"], MAX_WIDTH),
        (["--width", "1000000000"], MAX_WIDTH),
        (["--samples", str(MAX_SHOWN + 1)], MAX_SHOWN),
        (["--samples", "9" * 30], MAX_SHOWN),
        (["--samples", "20", "--width", str(MAX_WIDTH)], MAX_SHEET_PIXELS),
        (["-t", ",".join(map(str, range(MAX_THRESHOLDS + 1)))], MAX_THRESHOLDS),
    ],
)
def test_preview_bounds_the_sheet(media, tmp_path, args, limit):
    """A sheet too wide, too tall or with too many tiles is a usage error naming the limit,
    before any frame is decoded."""
    result = invoke("preview", *inputs(media), "-o", tmp_path / "s.png", *args)
    assert result.exit_code == 2, result.output
    assert str(limit) in the_error(result.stderr)
    assert not (tmp_path / "s.png").exists()


def test_preview_limits_allow_their_maximum():
    """The documented maxima themselves are accepted: the widest sheet with the default
    frames and thresholds, the most frames on a narrower one, the most thresholds."""
    check_sheet(4, 4, MAX_WIDTH)
    check_sheet(MAX_SHOWN, 4, 600)
    check_sheet(4, MAX_THRESHOLDS, 1600)


def test_shard_of_a_huge_count_costs_what_the_sources_do(media):
    """Shard i of 10**30 takes time and memory that follow the sources: nothing the size of
    the count is built (it was a list of N lists)."""
    sources = discover_inputs(inputs(media))
    n = 10**30
    tracemalloc.start()
    started = time.monotonic()
    try:
        picked = [shard_of(sources, i, n) for i in (0, n // 2, n - 1)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 1 and peak < 1 << 20
    assert sum(map(len, picked)) <= len(sources)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 20])
def test_every_shard_together_is_the_whole_run(media, n):
    """For small counts the shards, one after another, are the run's sources in order."""
    sources = discover_inputs(inputs(media))
    assert [s for i in range(n) for s in shard_of(sources, i, n)] == sources


def test_huge_shard_count_on_the_command_line(media, tmp_path):
    """--shard 0/99999999999999999999999 exits 0 at once with its notice, writing nothing."""
    started = time.monotonic()
    result = invoke("run", *inputs(media), "-o", tmp_path / "out", "--shard",
                    "0/99999999999999999999999", "--backend", "cpu")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "has no sources" in result.stderr and "Traceback" not in result.stderr
    assert time.monotonic() - started < 10 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("end", ["0", "0s", "0:00", "0.0s"])
def test_end_zero_is_a_usage_error(media, tmp_path, end):
    """--end 0 (or a time of 0) selects nothing in any file: exit 2, saying why."""
    result = invoke("run", *inputs(media), "-o", tmp_path / "out", "--end", end)
    assert result.exit_code == 2, result.output
    assert the_error(result.stderr) == f"Error: --end {end} keeps no frame: the end is not included"


@pytest.mark.parametrize(
    "scheduler, says",
    [
        ("tcp://[::1", "tcp://HOST:PORT"),
        ("tcp://[::1]:99999", "the port must be a number from 1 to 65535"),
        ("tcp://localhost:0", "the port must be a number from 1 to 65535"),
        ("tcp://localhost:65536", "the port must be a number from 1 to 65535"),
        ("tcp://[1.2.3.4]:8786", "is not a host name or address"),
        ("tcp://a b:8786", "is not a host name or address"),
        ("tcp://::1:8786", "is not a host name or address"),
    ],
)
def test_bad_scheduler_addresses_are_usage_errors(media, tmp_path, scheduler, says):
    """A scheduler address that cannot be one is exit 2 at once, not a ValueError or a
    connection attempt that times out."""
    started = time.monotonic()
    result = invoke("run", *inputs(media), "-o", tmp_path / "out", "--scheduler", scheduler)
    assert result.exit_code == 2, result.output
    assert says in the_error(result.stderr)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "scheduler",
    ["tcp://[::1]:8786", "tcp://127.0.0.1:1", "tcp://scheduler.example.org:65535",
     "tcp://dask_scheduler:8786", "tcp://[fe80::1%eth0]:8786"],
)  # fmt: skip
def test_good_scheduler_addresses_are_taken(scheduler):
    """Host names, IPv4 addresses and bracketed IPv6 ones, with a port from 1 to 65535."""
    assert parse_scheduler(scheduler) == ("tcp", scheduler)


@pytest.mark.parametrize("recursive", [False, True])
def test_links_that_loop_or_lead_nowhere_are_named(tmp_path, recursive):
    """A folder's link that loops, or whose target is gone, is skipped with one notice
    naming it; the run goes on with the folder's images (it was OSError 40, or silence)."""
    folder = make_folder(tmp_path / "in", 2)
    (folder / "loop.jpg").symlink_to("loop.jpg")
    (folder / "gone.png").symlink_to("nothing.png")
    out = tmp_path / "out"
    args = ["--recursive"] if recursive else []
    result = invoke("run", folder, "-o", out, "--backend", "cpu", *args)
    assert result.exit_code == 0, result.output
    notices = sorted(line for line in result.stderr.splitlines() if "symbolic link" in line)
    assert notices == [
        f"edgecli: {folder / 'gone.png'}: skipped, a symbolic link that leads nowhere",
        f"edgecli: {folder / 'loop.jpg'}: skipped, a symbolic link that loops",
    ]
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in out.glob("*.png")) == ["frame_0000.png", "frame_0001.png"]


def no_gpu() -> bool:
    from edgecli.cuda.driver import visible_devices

    return not visible_devices()


@pytest.mark.skipif(not no_gpu(), reason="a GPU is visible here")
def test_several_devices_without_a_gpu_is_one_cpu_run(media, tmp_path):
    """--device 0,1 where no GPU is visible runs once, on the CPU, as any CPU run under
    --backend auto: no cluster of workers labelled GPU 0 and GPU 1."""
    out = tmp_path / "out"
    result = invoke("run", *inputs(media), "-o", out, "--device", "0,1")
    assert result.exit_code == 0, result.output
    notices = [line for line in result.stderr.splitlines() if line.startswith("edgecli: ")]
    assert len(notices) == 1 and notices[0].endswith(" on cpu"), notices
    assert "GPU 0" not in result.stderr and "cluster" not in result.stderr
    assert len(list(out.glob("*.png"))) == 3 + VIDEO_FRAMES


@pytest.mark.skipif(not no_gpu(), reason="a GPU is visible here")
def test_several_devices_without_a_gpu_under_cuda_is_exit_4(media, tmp_path):
    """--device 0,1 --backend cuda where no GPU is visible: exit 4, one line, nothing run."""
    result = invoke("run", *inputs(media), "-o", tmp_path / "out", "--device", "0,1",
                    "--backend", "cuda")  # fmt: skip
    assert result.exit_code == 4, result.output
    assert the_error(result.stderr).startswith("Error: CUDA backend unusable")
    assert not (tmp_path / "out").exists()


# Tells the test when edgecli's command line has taken SIGINT over: at its first import after
# that, click's. Before it, for a millisecond or two of edgecli's own code (the package's
# __init__, the first lines of edgecli.cli), Python's KeyboardInterrupt still ends in a
# traceback, and before that CPython itself is starting: a SIGINT there kills it (no handler
# yet) or ends in its own "Fatal Python error" (while it imports site), which no program's
# code can change.
REPORT_CLICK_IMPORT = """
import os, sys

class ReportClickImport:
    def find_spec(self, name, path=None, target=None):
        if name == "click":
            sys.meta_path.remove(self)
            os.write(int(os.environ["EDGECLI_TEST_READY_FD"]), b"r")
        return None

sys.meta_path.insert(0, ReportClickImport())
"""


# A SIGINT that comes just as edgecli.cli puts Python's own handler back, at the end of its
# import: held pending until signal.signal has put it back, so the new handler takes it there.
SIGINT_AS_THE_HANDLER_COMES_BACK = """
import os, signal

real = signal.signal

def swapping(signum, handler):
    if signum != signal.SIGINT or handler is not signal.default_int_handler:
        return real(signum, handler)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    os.kill(os.getpid(), signal.SIGINT)
    try:
        return real(signum, handler)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

signal.signal = swapping
"""


def test_sigint_as_the_command_line_gives_sigint_back_is_exit_130_and_one_line(tmp_path):
    """SIGINT at the very moment edgecli.cli hands SIGINT back to Python, as its import ends:
    exit 130 with one 'Error: interrupted' line, no traceback from the import."""
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(SIGINT_AS_THE_HANDLER_COMES_BACK)
    path = os.pathsep.join(filter(None, [str(tmp_path / "hook"), os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        [*edgecli_command(), "--version"], env=os.environ | {"PYTHONPATH": path},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 130, result.stderr
    assert the_error(result.stderr).startswith("Error: interrupted by SIGINT")
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("delay_ms", [0, 1, 2, 5, 10, 20, 35, 50, 75, 100, 200])
def test_sigint_at_any_moment_is_exit_130_and_one_line(tmp_path, delay_ms):
    """SIGINT at any moment once edgecli.cli has begun (through its imports, the parsing,
    the listing and the run): exit 130 with one 'Error: interrupted' line, no traceback."""
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(REPORT_CLICK_IMPORT)
    ready_r, ready_w = os.pipe()
    path = os.pathsep.join(filter(None, [str(tmp_path / "hook"), os.environ.get("PYTHONPATH")]))
    env = os.environ | {"PYTHONPATH": path, "EDGECLI_TEST_READY_FD": str(ready_w)}
    folder = make_folder(tmp_path / "in", 300, shape=(240, 320))  # seconds of work
    process = subprocess.Popen(
        [*edgecli_command(), "run", folder, "-o", tmp_path / "out", "--backend", "cpu", "-q"],
        env=env, pass_fds=(ready_w,), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(ready_w)
    try:
        assert os.read(ready_r, 1) == b"r", "the child never imported click"
        time.sleep(delay_ms / 1000)
        process.send_signal(signal.SIGINT)
    finally:
        os.close(ready_r)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert the_error(stderr).startswith("Error: interrupted by SIGINT")
    assert stderr.count("\n") == 1, stderr


def test_processes_started_with_a_cluster_write_their_stderr_aside(tmp_path, capfd):
    """A process started while a cluster starts (a Dask worker) writes its stderr to the
    cluster's file, not the user's terminal, while edgecli's own messages still reach it."""
    from edgecli.cluster.run import _stderr_of_children

    with open(tmp_path / "workers", "w+b") as file:
        with _stderr_of_children(file):
            child = "import sys; sys.stderr.write('Traceback: a worker\\n')"
            subprocess.run([sys.executable, "-c", child], check=True)
            print("edgecli: a notice", file=sys.stderr)
        file.seek(0)
        assert file.read() == b"Traceback: a worker\n"
    err = capfd.readouterr().err
    assert "edgecli: a notice" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "workers_said, raised, error",
    [
        ("RuntimeError: can't start new thread\n", RuntimeError("Nanny failed to start."),
         "ResourceError"),
        ("", RuntimeError("can't start new thread"), "ResourceError"),
        ("", OSError(11, "Resource temporarily unavailable"), "ResourceError"),
        ("", OSError(98, "Address already in use"), "ClusterError"),
    ],
)  # fmt: skip
def test_a_cluster_refused_threads_is_a_resource_error(tmp_path, workers_said, raised, error):
    """A cluster whose workers (or this process) the system refused a thread or a process is
    a ResourceError saying so; any other failure to start, a ClusterError with its reason."""
    from edgecli.cluster.run import _start_error

    with open(tmp_path / "workers", "w+b") as file:
        file.write(workers_said.encode())
        found = _start_error("local:8", raised, file)
    assert type(found).__name__ == error
    if error == "ResourceError":
        assert str(found).startswith("scheduler local:8: cannot start its worker processes")
    else:
        assert str(found) == f"scheduler local:8: cannot start ({raised})"


@pytest.mark.parametrize("module", ["edgecli", "edgecli.cli"])
def test_importing_leaves_sigint_to_the_importer(module):
    """Importing edgecli or its command line (as a library or a test does) leaves SIGINT's
    handler as it was: only the program itself takes Ctrl-C over."""
    code = (
        "import signal\nbefore = signal.getsignal(signal.SIGINT)\n"
        f"import {module}, edgecli.options.params\n"
        "assert signal.getsignal(signal.SIGINT) is before is signal.default_int_handler\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_sigint_after_the_run_says_what_was_written(tmp_path, monkeypatch):
    """Ctrl-C once the run is done (while its summary is printed or --expect compares): exit
    130, one line saying how many frames were written, not that nothing was."""
    from edgecli.output.timing import Summary

    def interrupted(self, verbose=False):
        raise KeyboardInterrupt

    folder = make_folder(tmp_path / "in", 3)
    monkeypatch.setattr(Summary, "format_text", interrupted)
    result = invoke("run", folder, "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 130, result.output
    assert result.stderr.splitlines() == ["Error: interrupted by SIGINT; 3 frame(s) written"]
    assert len(list((tmp_path / "out").glob("*.png"))) == 3
