"""--skip-existing resumes only what a clean run would have made: the folder's recorded
options must match, and damaged outputs are recomputed."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

import edgecli
from edgecli.output.resume import MANIFEST_NAME
from tests import helpers

from .helpers import H264_CLIP, invoke
from .media import photo

make_folder = functools.partial(helpers.make_folder, name="f{i}.jpg")


def png_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}


def test_other_options_are_refused(tmp_path):
    """-t 50, then --skip-existing -t 100: exit 2 naming the folder and both option sets,
    and no output is touched."""
    folder, out = make_folder(tmp_path / "in", 3), tmp_path / "out"
    assert invoke("run", folder, "-o", out, "--backend", "cpu", "-t", 50).exit_code == 0
    (out / "f1.png").unlink()
    before = png_bytes(out)
    result = invoke("run", folder, "-o", out, "--backend", "cpu", "-t", 100, "--skip-existing")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {out}: --skip-existing would keep outputs made with other options "
        "(recorded: threshold=50 norm=l1 border=replicate png_bits=1; requested: threshold=100 "
        "norm=l1 border=replicate png_bits=1); write into another folder, or run without "
        "--skip-existing to recompute every frame\n"
    )
    assert png_bytes(out) == before


@pytest.mark.parametrize("option", [("--norm", "l2"), ("--border", "constant"), ("--png-bits", 8)])
def test_each_recorded_option_is_compared(tmp_path, option):
    """A change of norm, border or PNG bit depth is refused under --skip-existing too."""
    folder, out = make_folder(tmp_path / "in", 1), tmp_path / "out"
    assert invoke("run", folder, "-o", out, "--backend", "cpu").exit_code == 0
    result = invoke("run", folder, "-o", out, "--backend", "cpu", *option, "--skip-existing")
    assert result.exit_code == 2 and "made with other options" in result.stderr


def test_resume_with_the_same_options_equals_a_clean_run(tmp_path):
    """Same options: the resumed folder equals a clean run's byte for byte, manifest too."""
    folder = make_folder(tmp_path / "in", 5)
    clean, out = tmp_path / "clean", tmp_path / "out"
    edgecli.process(folder, clean, backend="cpu", threshold=60)
    edgecli.process(folder, out, backend="cpu", threshold=60)
    for name in ("f0.png", "f3.png"):
        (out / name).unlink()
    summary = edgecli.process(folder, out, backend="cpu", threshold=60, skip_existing=True)
    assert (summary.frames, summary.skipped_existing) == (2, 3)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in clean.iterdir())
    for path in clean.iterdir():
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name


def damaged(good: bytes, other_size: bytes) -> dict[str, bytes]:
    """Outputs that exist but must not be kept, by kind of damage."""
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    return {
        "empty": b"",
        "garbage": b"not a png at all" * 10,
        "truncated": good[: len(good) // 2],
        "no-iend": good[:-12],
        "flipped-byte": bytes(flipped),
        "wrong-size": other_size,
    }


@pytest.mark.parametrize(
    "kind", ["empty", "garbage", "truncated", "no-iend", "flipped-byte", "wrong-size"]
)
def test_damaged_outputs_are_recomputed(tmp_path, kind):
    """An output that is empty, garbage, truncated, corrupt or of another size is treated as
    missing: recomputed, and the folder equals a clean run."""
    folder, out = make_folder(tmp_path / "in", 3), tmp_path / "out"
    edgecli.process(folder, out, backend="cpu")
    clean = png_bytes(out)
    other = tmp_path / "other"
    edgecli.process(make_folder(tmp_path / "small", 1, shape=(10, 12)), other, backend="cpu")
    (out / "f1.png").write_bytes(damaged(clean["f1.png"], (other / "f0.png").read_bytes())[kind])
    summary = edgecli.process(folder, out, backend="cpu", skip_existing=True)
    assert (summary.frames, summary.skipped_existing) == (1, 2)
    assert png_bytes(out) == clean


def test_damaged_video_frame_output_is_recomputed(tmp_path):
    """A video's frame output cut short is recomputed on resume; the others are kept."""
    edgecli.process(H264_CLIP, tmp_path, backend="cpu")
    clean = png_bytes(tmp_path)
    name = "pan_h264_000005.png"
    (tmp_path / name).write_bytes(clean[name][:100])
    summary = edgecli.process(H264_CLIP, tmp_path, backend="cpu", skip_existing=True)
    assert (summary.frames, summary.skipped_existing) == (1, 23)
    assert png_bytes(tmp_path) == clean


def test_rotated_jpeg_output_is_kept(tmp_path):
    """A JPEG whose EXIF turns it 90 degrees: its whole output is kept on resume."""
    from PIL import Image

    source = tmp_path / "in" / "rot.jpg"
    source.parent.mkdir()
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise
    Image.fromarray(photo(20, 30)[:, :, ::-1]).save(source, exif=exif)
    edgecli.process(source, tmp_path / "out", backend="cpu")
    summary = edgecli.process(source, tmp_path / "out", backend="cpu", skip_existing=True)
    assert (summary.frames, summary.skipped_existing) == (0, 1)


def test_manifest_records_the_options(tmp_path):
    """Each run records its output-deciding options and edgecli's version beside the PNGs."""
    edgecli.process(make_folder(tmp_path / "in", 1), tmp_path / "out", backend="cpu",
                    threshold=7, norm="l2", border="reflect101", png_bits=8)  # fmt: skip
    manifest = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())
    assert manifest == {
        "schema": 1,
        "edgecli": edgecli.__version__,
        "options": {"threshold": 7, "norm": "l2", "border": "reflect101", "png_bits": 8},
        "mixed": False,
    }


def test_manifest_that_cannot_be_written_leaves_nothing(tmp_path, monkeypatch):
    """If the record cannot be written (disk full), the run fails before any PNG, leaving
    neither a partial record nor a temporary."""
    real_write = os.write

    def full_disk_write(fd, data):
        if ".edgecli-" in os.readlink(f"/proc/self/fd/{fd}") and b'"schema"' in bytes(data):
            real_write(fd, data[: len(data) // 2])
            raise OSError(28, os.strerror(28))
        return real_write(fd, data)

    # The Python os calls, where a full disk can be staged (the C write's failures, and the
    # error each gives, are tests/test_files.py's).
    monkeypatch.setattr("edgecli.native.c", None)
    monkeypatch.setattr("edgecli.output.sinks.os.write", full_disk_write)
    out = tmp_path / "out"
    result = invoke("run", make_folder(tmp_path / "in", 2), "-o", out, "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr == f"Error: {out / MANIFEST_NAME}: cannot write (disk full)\n"
    assert list(out.iterdir()) == []


def test_folder_without_manifest_is_refused_then_adopted(tmp_path):
    """PNGs with no record (an older edgecli) are refused under --skip-existing; a run
    without it rewrites them and records its options, and then resume works."""
    folder, out = make_folder(tmp_path / "in", 2), tmp_path / "out"
    edgecli.process(folder, out, backend="cpu", threshold=50)
    (out / MANIFEST_NAME).unlink()
    result = invoke("run", folder, "-o", out, "--backend", "cpu", "--skip-existing")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: {out}: --skip-existing would keep outputs made with unknown options (no "
        f"readable {MANIFEST_NAME}: written by an older edgecli or another tool); write into "
        "another folder, or run without --skip-existing to recompute every frame\n"
    )
    assert invoke("run", folder, "-o", out, "--backend", "cpu").exit_code == 0
    result = invoke("run", folder, "-o", out, "--backend", "cpu", "--skip-existing")
    assert result.exit_code == 0, result.output


def test_partly_rewritten_folder_is_refused_until_rewritten_whole(tmp_path):
    """-t 50 on two frames, -t 100 on one of them: the other is stale, so --skip-existing
    -t 100 is refused until a run has rewritten every PNG with -t 100."""
    folder, out = make_folder(tmp_path / "in", 2), tmp_path / "out"
    edgecli.process(folder, out, backend="cpu", threshold=50)
    edgecli.process(folder / "f0.jpg", out, backend="cpu")
    result = invoke("run", folder, "-o", out, "--backend", "cpu", "--skip-existing")
    assert result.exit_code == 2 and "holds PNGs of several runs" in result.stderr
    edgecli.process(folder, out, backend="cpu")
    summary = edgecli.process(folder, out, backend="cpu", skip_existing=True)
    assert (summary.frames, summary.skipped_existing) == (0, 2)
