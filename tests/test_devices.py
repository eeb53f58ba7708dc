"""--device N,M / all: one Dask worker process a GPU, each seeing only its own (its
CUDA_VISIBLE_DEVICES), the sources shared out as shards. On the CPU backend here: the workers'
outputs, their devices and the option's errors; the GPU runs are the H200's."""

from __future__ import annotations

import json

import cv2
import pytest

from edgecli.cli.run import gpu_ids
from edgecli.errors import EXIT_USAGE
from edgecli.options.params import parse_devices

from .helpers import invoke
from .media import photo

pytest.importorskip("distributed", reason="the cluster extra is not installed")


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    for i in range(9):
        cv2.imwrite(str(root / f"f{i}.png"), photo(23 + i, 37, seed=i))
    return root


def pngs(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}


def summary_of_run(tmp_path, out, *args) -> dict:
    """``edgecli run`` of ``args`` into ``out`` (CPU backend, quiet); its JSON summary."""
    summary = tmp_path / "s.json"
    result = invoke("run", *args, "-o", out, "--backend", "cpu", "-q", "--json-summary", summary)
    assert result.exit_code == 0, result.output
    return json.loads(summary.read_text())


def test_several_devices_run_a_worker_each_and_equal_a_plain_run(folder, tmp_path, monkeypatch):
    import dask

    monkeypatch.setattr("edgecli.cuda.driver.visible_devices", lambda: ["0", "1"])  # 2 GPUs
    plain = invoke("run", folder, "-o", tmp_path / "plain", "--backend", "cpu", "-q")
    assert plain.exit_code == 0, plain.output
    # Where a GPU is there, Dask's own NVML probe would refuse a worker the missing GPU 1.
    with dask.config.set({"distributed.diagnostics.nvml": False}):
        data = summary_of_run(tmp_path, tmp_path / "two", folder, "--device", "0,1")
    assert pngs(tmp_path / "two") == pngs(tmp_path / "plain") and len(pngs(tmp_path / "two")) == 9
    assert data["scheduler"] == "devices:0,1" and data["frames"] == 9
    assert sorted(w["device"] for w in data["workers_detail"]) == ["0", "1"]
    assert sum(w["frames"] for w in data["workers_detail"]) == 9


@pytest.mark.parametrize(
    "args, message",
    [
        (["--device", "x"], "device must be an index, a list such as 0,2, or all"),
        (["--device", "0,0"], "device lists a GPU more than once"),
        (["--device", "-1"], "device must be an index"),
        (["--device", "\u00b2"], "device must be an index"),  # a digit to isdigit, not to int
        (["--device", "0,1", "--scheduler", "local:2"], "cannot be combined with --scheduler"),
        (["--device", "0,1", "--timings-csv", "t.csv"], "--timings-csv cannot be combined"),
        (["--device", "0,1", "--shard", "0/2"], "cannot be combined with --shard"),
    ],
)
def test_device_usage_errors(folder, tmp_path, args, message):
    out = tmp_path / "out"
    result = invoke("run", folder, "-o", out, "--backend", "cpu", *args)
    assert result.exit_code == EXIT_USAGE, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_device_all_without_a_gpu_is_a_plain_run(folder, tmp_path, monkeypatch):
    monkeypatch.setattr("edgecli.cuda.driver.visible_devices", lambda: [])
    data = summary_of_run(tmp_path, tmp_path / "out", folder, "--device", "all")
    assert data["frames"] == 9 and "scheduler" not in data


def test_gpu_ids_follow_this_process_cuda_visible_devices(monkeypatch):
    monkeypatch.setattr("edgecli.cuda.driver.visible_devices", lambda: ["3", "5"])
    assert gpu_ids(None) == ["3", "5"]
    assert gpu_ids([1, 0]) == ["5", "3"]
    assert gpu_ids([4]) == ["4"]  # not seen here: the worker says what is wrong with it
    assert parse_devices("all") is None and parse_devices(" 2, 0 ") == [2, 0]
