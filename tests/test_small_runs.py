"""--backend auto gives the CPU backend a run too small to be worth CUDA's start (its outputs
are the same): still images whose header pixels the workers are done with first. Tested with
the CUDA check made to say yes, so that choosing CUDA would import CuPy, which a test machine
without a GPU does not have: a small run must not get that far."""

from __future__ import annotations

import json

import cv2
import pytest
from click.testing import CliRunner

from edgecli.cli import main
from edgecli.cli import run as cli_run
from edgecli.edges import backends
from edgecli.inputs.sources import discover_inputs
from edgecli.options.params import Options
from edgecli.pipeline import runner
from edgecli.pipeline.runner import SMALL_RUN_FILES, SMALL_RUN_PIXELS, small_run

from .helpers import H264_CLIP
from .media import photo


def images(folder, shapes) -> list:
    folder.mkdir()
    for i, (height, width) in enumerate(shapes):
        cv2.imwrite(str(folder / f"f{i:03d}.jpg"), photo(height, width, seed=i))
    return discover_inputs([str(folder)])


def test_a_few_images_are_small_and_many_pixels_are_not(tmp_path):
    assert small_run(images(tmp_path / "few", [(240, 320)] * 3), workers=1)
    # Past SMALL_RUN_PIXELS a worker: 2 workers hold 8 MP, these are 9.
    big = images(tmp_path / "big", [(1500, 2000)] * 3)
    assert not small_run(big, workers=2) and small_run(big, workers=3)
    assert 3 * 1500 * 2000 > 2 * SMALL_RUN_PIXELS


def test_many_files_videos_and_unknown_sizes_are_not_small(tmp_path):
    many = images(tmp_path / "many", [(4, 4)] * (SMALL_RUN_FILES + 1))
    assert not small_run(many, workers=1) and small_run(many, workers=2)
    assert not small_run(discover_inputs([str(H264_CLIP)]), workers=64)
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "x.png").write_bytes(b"not a png at all")
    assert not small_run(discover_inputs([str(odd)]), workers=64)


@pytest.fixture
def cuda_says_yes(monkeypatch):
    """A GPU with CuPy installed, and the CUDA check passes; choosing CUDA then imports CuPy
    (ImportError without it)."""
    monkeypatch.setattr(backends, "cuda_installed", lambda: True)
    monkeypatch.setattr(backends, "cuda_unusable_reason", lambda *args, **kwargs: None)


def test_without_a_gpu_or_cupy_auto_says_why_as_always(tmp_path, monkeypatch):
    """Where CUDA could not run anyway, a small run gets the reason, not the small-run notice:
    no GPU (under -v), or a GPU without CuPy (the install hint)."""
    images(tmp_path / "in", [(8, 8)])
    done = CliRunner().invoke(main, ["run", str(tmp_path / "in"), "-o", str(tmp_path / "a"), "-v"])
    assert done.exit_code == 0 and backends.SMALL_RUN not in done.output
    assert "no NVIDIA GPU" in done.output or "CUDA unusable" in done.output


def test_auto_gives_a_small_run_the_cpu_and_says_so_when_asked(cuda_says_yes, tmp_path):
    images(tmp_path / "in", [(120, 160)] * 2)
    done = CliRunner().invoke(
        main, ["run", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "-v",
               "--json-summary", str(tmp_path / "s.json")],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads((tmp_path / "s.json").read_text())["backend"] == "cpu"
    assert backends.SMALL_RUN in done.output
    quiet = CliRunner().invoke(main, ["run", str(tmp_path / "in"), "-o", str(tmp_path / "q")])
    assert quiet.exit_code == 0 and backends.SMALL_RUN not in quiet.output


@pytest.mark.parametrize("chosen", [{"backend": "cuda"}, {"decode": "gpu"}])
def test_cuda_or_gpu_decoding_asked_for_is_never_small(cuda_says_yes, chosen):
    """--backend cuda, or --decode gpu (which needs it), keep CUDA however small the run: the
    choice goes on to the CUDA backend, whose CuPy this machine lacks."""
    assert isinstance(backends.select_backend(Options(), small=True).backend, backends.CpuBackend)
    with pytest.raises(ImportError, match="cupy"):
        backends.select_backend(Options(**chosen), small=True)


def test_a_cluster_task_is_never_small(monkeypatch, tmp_path):
    """A task handed its sources (a cluster's) keeps the backend it was given: only a run that
    lists its own sources is weighed."""
    weighed = []
    monkeypatch.setattr(runner, "small_run", lambda *args: weighed.append(args) or False)
    sources = images(tmp_path / "in", [(16, 16)])
    runner.run(str(tmp_path / "in"), tmp_path / "out", Options(), sources=sources)
    assert weighed == []
    runner.run(str(tmp_path / "in"), tmp_path / "out2", Options())
    assert len(weighed) == 1
    runner.run(str(tmp_path / "in"), tmp_path / "out3", Options(backend="cpu"))
    assert len(weighed) == 1  # the CPU asked for: nothing to weigh


def test_the_driver_is_not_started_early_for_a_few_image_files(tmp_path):
    folder = tmp_path / "in"
    shot = images(folder, [(8, 8)])[0].path
    assert cli_run.few_image_files((str(shot),))
    assert not cli_run.few_image_files((str(folder),))  # a folder may hold anything
    assert not cli_run.few_image_files((str(H264_CLIP),))
    assert not cli_run.few_image_files((str(shot),) * (cli_run.FEW_IMAGE_FILES + 1))
    assert not cli_run.few_image_files(())
