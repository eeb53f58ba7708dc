"""--scheduler: a run as shards on a Dask cluster (edgecli.cluster.run), on the CPU backend."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import pytest

from edgecli.cluster.run import run_on_cluster
from edgecli.edges.backends import CpuBackend
from edgecli.errors import OptionError, ResourceError
from edgecli.options.params import Options

from .helpers import folder_bytes, invoke, make_folder
from .media import REPO, photo, write_video

distributed = pytest.importorskip("distributed", reason="the cluster extra is not installed")


@pytest.fixture(scope="module")
def scheduler():
    """The address of one LocalCluster of 2 one-thread worker processes, for the module."""
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=50,
    ) as cluster:
        yield cluster.scheduler_address


@pytest.fixture
def media(tmp_path):
    """A folder of 6 images and 3 short videos: 9 sources, 6 + 3 x 5 frames, given file by
    file or as a folder."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(6):
        cv2.imwrite(str(folder / f"img{i}.png"), photo(23, 37, seed=i))
    for v in range(3):
        write_video(folder / f"clip{v}.avi", [photo(32, 48, seed=v + k) for k in range(5)])
    return folder


def plain_run(media: Path, out: Path) -> dict[str, bytes]:
    result = invoke("run", *sorted(media.iterdir()), "-o", out, "--backend", "cpu", "-q")
    assert result.exit_code == 0, result.output
    return folder_bytes(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_local_cluster_equals_plain_run(media, tmp_path):
    """--scheduler local:2 writes exactly the files, byte for byte, of a plain run."""
    expected = plain_run(media, tmp_path / "plain")
    out = tmp_path / "cluster"
    result = invoke("run", *sorted(media.iterdir()), "-o", out, "--scheduler", "local:2", "-q")
    assert result.exit_code == 0, result.output
    assert len([n for n in expected if n.endswith(".png")]) == 6 + 3 * 5
    assert folder_bytes(out) == expected


def test_a_cluster_run_chooses_selects_and_checks_as_a_plain_run(media, tmp_path):
    """-t auto, --every and --expect on local:2: the threshold chosen once by the client (the
    plain run's), the frames a plain run selects, and a plain run's manifest holds."""
    inputs = sorted(media.iterdir())
    golden = tmp_path / "golden.json"
    args = ["--backend", "cpu", "-q", "-t", "auto", "--every", "2"]
    plain = invoke("run", *inputs, "-o", tmp_path / "plain", *args, "--write-expected", golden,
                   "--json-summary", tmp_path / "plain.json")  # fmt: skip
    assert plain.exit_code == 0, plain.output
    out = tmp_path / "cluster"
    result = invoke("run", *inputs, "-o", out, *args, "--scheduler", "local:2",
                    "--expect", golden, "--json-summary", tmp_path / "cluster.json")  # fmt: skip
    assert result.exit_code == 0, result.output
    chosen = json.loads((tmp_path / "plain.json").read_text())["params"]
    assert json.loads((tmp_path / "cluster.json").read_text())["params"] == chosen
    assert isinstance(chosen["threshold"], int) and chosen["threshold_rule"] == "auto"
    assert folder_bytes(out) == folder_bytes(tmp_path / "plain")
    assert sorted(p.name for p in out.glob("clip0_*.png")) == [
        "clip0_000000.png", "clip0_000002.png", "clip0_000004.png",
    ]  # fmt: skip


def test_merged_summary_lists_a_failure_once(media, tmp_path, scheduler):
    """A corrupt file under --on-error skip: exit 3, the frame named once on stderr and once in
    the merged summary, whose counts and per-worker detail add up to the whole run."""
    (media / "bad.png").write_bytes(b"not an image")
    out = tmp_path / "out"
    report = tmp_path / "summary.json"
    result = invoke(
        "run", *sorted(media.iterdir()), "-o", out, "--scheduler", scheduler, "--on-error", "skip",
        "--json-summary", report, "--backend", "cpu",
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    summary = json.loads(report.read_text())
    assert summary["frames"] == 6 + 3 * 5
    assert summary["decoders"] == {"cpu": 6 + 3 * 5}
    assert summary["videos"] == {}  # no GPU decoding: no video NVDEC left to the CPU
    assert [f["source"] for f in summary["failed"]] == [str(media / "bad.png")]
    assert result.output.count(f"skipped {media / 'bad.png'}") == 1
    assert sum(w["frames"] for w in summary["workers_detail"]) == summary["frames"]
    assert sum(w["tasks"] for w in summary["workers_detail"]) == summary["tasks"] == 8
    # Each resource's lanes: every Dask worker's, summed; its time: every task's.
    assert summary["busy"]["workers"]["lanes"] == summary["workers"]
    assert summary["busy"]["reader"]["lanes"] == len(summary["workers_detail"])
    decode_s = summary["busy"]["workers"]["stages_s"]["decode"]
    assert decode_s == pytest.approx(summary["stages"]["decode"]["total_ms"] / 1e3, abs=1e-3)


def test_failure_under_fail_is_one_error(media, tmp_path, scheduler):
    """A corrupt file under --on-error fail: exit 1 and one Error line naming it."""
    (media / "bad.png").write_bytes(b"not an image")
    result = invoke("run", media, "-o", tmp_path / "out", "--scheduler", scheduler)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert errors == [
        f"Error: {media / 'bad.png'}: not a decodable image (corrupt, truncated or wrong type)"
    ]


class DiesOnce(CpuBackend):
    """The CPU backend, whose worker process dies (os._exit) at the third frame of a task, the
    first time only: ``marker`` records that it did."""

    def __init__(self, options: Options, marker: Path):
        super().__init__(options)
        self.marker = marker
        self.frames = 0

    def detect(self, frames_bgr):
        self.frames += len(frames_bgr)
        if self.frames >= 3:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os._exit(1)
        return super().detect(frames_bgr)


def test_killed_worker_still_ends_in_a_complete_folder(media, tmp_path, scheduler):
    """A worker process that dies mid-run costs only a retry of its task: the folder equals a
    plain run's, with no temporary left, and the run returns every frame."""
    expected = plain_run(media, tmp_path / "plain")
    marker = tmp_path / "died"
    options = Options(backend="cpu", workers=1)
    out = tmp_path / "cluster"
    summary = run_on_cluster(
        sorted(media.iterdir()), out, options, scheduler, backend=DiesOnce(options, marker)
    )
    assert marker.exists()  # a worker did die
    assert summary.frames == 6 + 3 * 5 and not summary.failed and not summary.interrupted
    assert folder_bytes(out) == expected


def test_unreachable_scheduler_is_one_error(tmp_path, media):
    """A scheduler address nothing answers on: one Error line and exit 1, within the bound."""
    import dask

    address = f"tcp://127.0.0.1:{free_port()}"
    started = time.perf_counter()
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        result = invoke("run", media, "-o", tmp_path / "out", "--scheduler", address)
    assert time.perf_counter() - started < 5
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: scheduler {address}: cannot connect")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["local:0", "local:x", "tcp://nohost", "udp://h:1", "local"])
def test_bad_scheduler_is_a_usage_error(media, tmp_path, value):
    """A --scheduler that is neither local:N nor tcp://HOST:PORT: exit 2, one Error line."""
    result = invoke("run", media, "-o", tmp_path / "out", "--scheduler", value)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: scheduler must be local:N")


def test_scheduler_excludes_shard(media, tmp_path):
    """--scheduler runs the shards itself: combined with a shard it is a usage error."""
    with pytest.raises(OptionError, match="cannot be combined with --shard") as raised:
        run_on_cluster([media], tmp_path / "out", Options(shard=(0, 2)), "local:2")
    assert raised.value.exit_code == 2


def test_scheduler_excludes_timings_csv(media, tmp_path):
    """--timings-csv is refused with --scheduler (exit 2) before anything is written."""
    out = tmp_path / "out"
    result = invoke("run", media, "-o", out, "--scheduler", "local:2", "--timings-csv", "t.csv")
    assert result.exit_code == 2, result.output
    assert not out.exists()


def test_plain_cli_does_not_import_dask(media, tmp_path):
    """Neither importing edgecli.cli nor a plain run loads dask or distributed."""
    code = (
        "import sys; from edgecli.cli import main\n"
        f"try: main(['run', {str(media)!r}, '-o', {str(tmp_path / 'out')!r}, '-q'])\n"
        "except SystemExit as e: assert e.code in (0, None), e.code\n"
        "loaded = sorted(m for m in ('dask', 'distributed') if m in sys.modules)\n"
        "assert not loaded, loaded"
    )
    env = os.environ | {"PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "out").glob("*.png"))) == 6 + 3 * 5


class Slow(CpuBackend):
    """The CPU backend, 100 ms a frame slower: a run long enough to be stopped midway."""

    def detect(self, frames_bgr):
        time.sleep(0.1)
        return super().detect(frames_bgr)


def test_stop_ends_tasks_with_whole_outputs(media, tmp_path, scheduler):
    """A stop request (what SIGINT sets) midway: the tasks finish their frames in flight, the
    summary says interrupted and counts exactly the PNGs in the folder, none partial."""
    import threading

    from edgecli.output.png import whole_png_pixels

    options = Options(backend="cpu", workers=1)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    out = tmp_path / "out"
    inputs = sorted(media.iterdir())
    summary = run_on_cluster(inputs, out, options, scheduler, backend=Slow(options), stop=stop)
    pngs = list(out.glob("*.png"))
    assert summary.interrupted and 0 < summary.frames == len(pngs) < 6 + 3 * 5
    assert all(whole_png_pixels(p, 1) for p in pngs)
    assert not [p for p in out.iterdir() if p.suffix == ".tmp"]


def _sleeper(seconds: float) -> None:
    time.sleep(seconds)


@pytest.mark.parametrize("caller", ["cli", "library", "devices"])
def test_a_cluster_that_never_starts_fails_within_its_bound(tmp_path, monkeypatch, caller):
    """A cluster start (local:N, or one worker a GPU) that never returns fails the run within
    its bound in one ResourceError line, exit 1, its worker processes killed and a process it
    did not start left running."""
    import multiprocessing

    import psutil

    from edgecli.cluster import run as cluster

    started = {}

    def never_starting(*args, **kwargs):
        # A worker process, as a nanny spawns one, and a process some other code starts.
        worker = multiprocessing.get_context("spawn").Process(target=_sleeper, args=(600,))
        worker.start()
        started["worker"] = psutil.Process(worker.pid)
        started["other"] = subprocess.Popen(["sleep", "600"])
        threading.Event().wait()

    monkeypatch.setattr(distributed, "LocalCluster", never_starting)
    monkeypatch.setattr(cluster, "gpu_cluster", never_starting)
    monkeypatch.setattr(cluster, "START_S", 3.0)
    monkeypatch.setattr(cluster, "START_S_PER_WORKER", 0.5)
    folder = make_folder(tmp_path / "in", 2)
    what = "devices 0,1" if caller == "devices" else "local:2"
    error = (
        f"scheduler {what}: its worker processes did not start within 4 s: the system may be "
        "refusing them threads or processes (a limit such as ulimit -u or a container's "
        "pids.max); ask for fewer workers or raise the limit"
    )
    began = time.perf_counter()
    try:
        if caller == "cli":
            result = invoke("run", folder, "-o", tmp_path / "out", "--scheduler", "local:2")
            assert result.exit_code == 1, result.output
            assert result.stderr.splitlines() == [f"Error: {error}"]
            assert "Traceback" not in result.output
        else:
            with pytest.raises(ResourceError) as raised:
                if caller == "library":
                    run_on_cluster([folder], tmp_path / "out", Options(), "local:2")
                else:
                    cluster.connect("devices", ["0", "1"], 10.0)
            assert str(raised.value) == error
        assert time.perf_counter() - began < 4 + 10
        assert not started["worker"].is_running() or started["worker"].status() == "zombie"
        assert started["other"].poll() is None
        assert not (tmp_path / "out").exists()
    finally:
        started["other"].kill()
        started["other"].wait()
        if started["worker"].is_running():  # the test failed: leave nothing behind
            started["worker"].kill()
