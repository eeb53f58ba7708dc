"""Runs into one output folder at once: a run with other output-deciding options is refused
while another writes there, runs with the same options share it, and a dead run's claim
blocks nothing (edgecli.output.claims)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import edgecli
from edgecli.output.claims import CLAIM_PREFIX, CLAIM_STALE_S
from edgecli.output.resume import MANIFEST_NAME
from edgecli.output.sinks import HOST

from .helpers import edgecli_command, invoke, make_folder

# A sitecustomize for a run the test holds: once the run has claimed its output folder and
# written its record, it tells the test and waits for its word before it writes any PNG.
HOLD_AFTER_BEGIN = """
import os

import edgecli.output.resume as resume

begin = resume.begin

def held(*args, **kwargs):
    mixed = begin(*args, **kwargs)
    ready, go = (int(fd) for fd in os.environ["EDGECLI_TEST_HOLD_FDS"].split(","))
    os.write(ready, b"r")
    os.read(go, 1)
    return mixed

resume.begin = held
"""


def run_args(folder: Path, out: Path, *extra) -> list[str]:
    return [*edgecli_command(), "run", str(folder), "-o", str(out), "--backend", "cpu", "-q",
            *map(str, extra)]  # fmt: skip


@contextlib.contextmanager
def held_run(tmp_path: Path, folder: Path, out: Path, *extra):
    """A run of ``folder`` into ``out`` as a process of its own, held after it has claimed the
    folder (and before its first PNG) for the ``with`` block, then let go."""
    hook = tmp_path / "hold-hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOLD_AFTER_BEGIN)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    env = os.environ | {"PYTHONPATH": path, "EDGECLI_TEST_HOLD_FDS": f"{ready_w},{go_r}"}
    process = subprocess.Popen(
        run_args(folder, out, *extra), env=env, pass_fds=(ready_w, go_r),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(ready_w)
    os.close(go_r)
    try:
        assert os.read(ready_r, 1) == b"r", process.communicate(timeout=60)[1]
        yield process
    finally:
        os.close(go_w)
        os.close(ready_r)
        if process.poll() is None:
            process.communicate(timeout=120)


def run_now(folder: Path, out: Path, *extra) -> subprocess.CompletedProcess:
    return subprocess.run(run_args(folder, out, *extra), capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def claims_in(out: Path) -> list[str]:
    return sorted(p.name for p in out.glob(f"{CLAIM_PREFIX}*"))


def png_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_folder(tmp_path_factory.mktemp("frames"), 6, shape=(30, 40))


@pytest.fixture(scope="module")
def clean(folder, tmp_path_factory):
    """The PNGs of a run alone, by its threshold."""
    made = {}
    for threshold in (50, 100):
        out = tmp_path_factory.mktemp(f"clean{threshold}")
        edgecli.process(folder, out, backend="cpu", threshold=threshold)
        made[threshold] = png_bytes(out)
    return made


@pytest.mark.parametrize(
    "extra, differ",
    [
        (["-t", "50"], "threshold=100; this run: threshold=50"),
        (["--norm", "l2", "--png-bits", "8"], "norm=l1 png_bits=1; this run: norm=l2 png_bits=8"),
    ],
)
def test_other_options_are_refused_while_a_run_writes(folder, clean, tmp_path, extra, differ):
    """A second run with other output-deciding options, while the first writes into the same
    folder: exit 2, one line naming the first run's process, host and the options that differ;
    the first then finishes alone, and the record it leaves tells the truth."""
    out = tmp_path / "out"
    with held_run(tmp_path, folder, out) as first:
        second = run_now(folder, out, *extra)
        assert second.returncode == 2, second.stderr
        assert second.stderr == (
            f"Error: {out}: another edgecli run writes into this folder with other options "
            f"(pid {first.pid} on {HOST}: {differ}); wait for it to end, or choose another "
            "output folder\n"
        )
    assert first.returncode == 0, first.stderr
    assert png_bytes(out) == clean[100]
    record = json.loads((out / MANIFEST_NAME).read_text())
    assert record["options"]["threshold"] == 100 and record["mixed"] is False
    assert claims_in(out) == []


@pytest.mark.parametrize(
    "first_extra, second_extra",
    [
        ([], []),  # the same command twice
        ([], ["--workers", "2"]),  # options that do not decide the bytes may differ
        (["--shard", "0/2"], ["--shard", "1/2"]),  # shards of one run
    ],
)
def test_runs_with_the_same_options_share_the_folder(
    folder, clean, tmp_path, first_extra, second_extra
):
    """Runs with the same output-deciding options write into one folder at once: both exit 0,
    and the folder equals a single run's, with no claim left."""
    out = tmp_path / "out"
    with held_run(tmp_path, folder, out, *first_extra) as first:
        second = run_now(folder, out, *second_extra)
        assert second.returncode == 0, second.stderr
    assert first.returncode == 0, first.stderr
    assert png_bytes(out) == clean[100]
    assert claims_in(out) == []


def test_a_killed_runs_claim_does_not_block(folder, clean, tmp_path):
    """A run killed (SIGKILL) while it holds the folder leaves its claim, which the next run,
    with other options, finds dead: it runs, and removes the claim."""
    out = tmp_path / "out"
    with held_run(tmp_path, folder, out) as first:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    assert claims_in(out) == [f"{CLAIM_PREFIX}{first.pid}-0@{HOST}.json"]
    second = run_now(folder, out, "-t", "50")
    assert second.returncode == 0, second.stderr
    assert png_bytes(out) == clean[50]
    assert claims_in(out) == []


def test_a_run_leaves_no_claim_of_a_run_that_died_during_it(folder, tmp_path, monkeypatch):
    """A claim of the same options whose process dies while the run goes (a killed worker of
    its cluster, say) is gone once the run ends: a finished folder holds only its outputs."""
    import edgecli.pipeline.runner as runner

    out = tmp_path / "out"
    child = subprocess.Popen(["true"])
    child.wait()  # its number now names no process
    options = {"threshold": 100, "norm": "l1", "border": "replicate", "png_bits": 1}
    real = runner._run_into

    def run_into(out_dir, *args, **kwargs):  # the run holds its claim: another joins, dies
        claim = out_dir / f"{CLAIM_PREFIX}{child.pid}-0@{HOST}.json"
        claim.write_text(json.dumps({"pid": child.pid, "host": HOST, "options": options}))
        return real(out_dir, *args, **kwargs)

    monkeypatch.setattr(runner, "_run_into", run_into)
    summary = edgecli.process(folder, out, backend="cpu")
    assert summary.frames > 0 and claims_in(out) == []


@pytest.mark.parametrize("host", ["elsewhere", HOST], ids=["another-host", "this-host"])
@pytest.mark.parametrize("age_s, refused", [(0, True), (CLAIM_STALE_S + 60, False)])
def test_a_claim_blocks_until_it_is_stale(folder, tmp_path, host, age_s, refused):
    """A claim with other options refuses the run while it is refreshed, whether another
    host's (a shard writing into a shared folder) or of a live process here, and is taken for
    a dead run's once it is not refreshed (its process number reused since, say)."""
    out = tmp_path / "out"
    out.mkdir()
    pid = 4242 if host == "elsewhere" else os.getpid()  # this process: alive
    claim = out / f"{CLAIM_PREFIX}{pid}-0@{host}.json"
    options = {"threshold": 50, "norm": "l1", "border": "replicate", "png_bits": 1}
    claim.write_text(json.dumps({"pid": pid, "host": host, "options": options}))
    then = time.time() - age_s
    os.utime(claim, (then, then))
    result = invoke("run", folder, "-o", out, "--backend", "cpu")
    if refused:
        assert result.exit_code == 2
        assert f"(pid {pid} on {host}: threshold=50; this run: threshold=100)" in result.stderr
        assert claim.exists() and not list(out.glob("*.png"))
    else:
        assert result.exit_code == 0, result.stderr
        assert not claim.exists() and len(list(out.glob("*.png"))) == 6


def test_a_cluster_run_is_refused_where_a_run_of_other_options_writes(folder, tmp_path):
    """--scheduler: the client checks the folder's claims before any task starts, and is
    refused as a plain run is (exit 2), with no PNG written."""
    out = tmp_path / "out"
    out.mkdir()
    claim = out / f"{CLAIM_PREFIX}4242-0@elsewhere.json"
    options = {"threshold": 100, "norm": "l2", "border": "replicate", "png_bits": 1}
    claim.write_text(json.dumps({"pid": 4242, "host": "elsewhere", "options": options}))
    result = invoke("run", folder, "-o", out, "--scheduler", "local:1", "-q")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {out}: another edgecli run writes into this folder with other options (pid "
        "4242 on elsewhere: norm=l2; this run: norm=l1); wait for it to end, or choose another "
        "output folder\n"
    )
    assert not list(out.glob("*.png"))
