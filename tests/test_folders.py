"""What a folder INPUT takes: every file a file INPUT takes (images, videos, animations),
named as those files are; not edgecli's own outputs, nor dot-folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import imageio.v3 as iio
import numpy as np
import pytest

import edgecli
from edgecli.inputs.sources import count_frames, discover
from edgecli.output.resume import MANIFEST_NAME

from .helpers import folder_bytes, invoke
from .media import photo, write_video

pytest.importorskip("imageio_ffmpeg", reason="imageio-ffmpeg (edgecli[dev]) is not installed")
from .clips import encode  # noqa: E402


def png_bytes(folder: Path) -> dict[str, bytes]:
    """Every PNG below ``folder``, by its relative path."""
    return {k: v for k, v in folder_bytes(folder).items() if k.endswith(".png")}


def each_file_alone(files: list[Path], out: Path, *extra) -> dict[str, bytes]:
    """The PNGs of a run of each file as a file INPUT, into one folder."""
    for path in files:
        result = invoke("run", path, "-o", out, "--backend", "cpu", "-q", *extra)
        assert result.exit_code == 0, result.output
    return png_bytes(out)


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    """A folder of three clips in two containers, whose natural order (a2, a10, b) is not
    their byte order."""
    folder = tmp_path_factory.mktemp("clips")
    encode(folder / "b.mp4", [photo(24, 32, seed=i) for i in range(4)])
    write_video(folder / "a10.avi", [photo(20, 30, seed=i) for i in range(3)])
    write_video(folder / "a2.avi", [photo(18, 26, seed=i + 5) for i in range(2)])
    return folder


@pytest.fixture
def mixed(tmp_path) -> Path:
    """A folder of a JPEG, a PNG, an .mp4 and an animated .gif."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    cv2.imwrite(str(folder / "still.jpg"), photo(21, 33, seed=1))
    cv2.imwrite(str(folder / "plain.png"), photo(19, 27, seed=2))
    encode(folder / "clip.mp4", [photo(24, 32, seed=i) for i in range(3)])
    frames_rgb = np.stack([photo(16, 20, seed=i)[:, :, ::-1] for i in range(2)])
    iio.imwrite(folder / "anim.gif", frames_rgb, extension=".gif", loop=0)
    return folder


def test_a_folder_of_clips_equals_each_clip_given_as_a_file(clips, tmp_path):
    """A folder of videos is read, in natural order, each clip's frames named and computed as
    when the clip is given as a file."""
    assert [s.path.name for s in discover(clips)] == ["a2.avi", "a10.avi", "b.mp4"]
    result = invoke("run", clips, "-o", tmp_path / "out", "--backend", "cpu", "-q")
    assert result.exit_code == 0, result.output
    made = png_bytes(tmp_path / "out")
    assert sorted(made) == sorted(
        [f"a2_{i:06d}.png" for i in range(2)]
        + [f"a10_{i:06d}.png" for i in range(3)]
        + [f"b_{i:06d}.png" for i in range(4)]
    )
    assert made == each_file_alone(sorted(clips.iterdir()), tmp_path / "alone")


def test_a_mixed_folder_takes_every_kind(mixed, tmp_path):
    """Images, an .mp4 and an animated .gif in one folder: every frame of each, as when each
    file is given alone, and the progress bar counts them all."""
    assert count_frames(discover(mixed)) == 1 + 1 + 3 + 2
    result = invoke("run", mixed, "-o", tmp_path / "out", "--backend", "cpu", "-q")
    assert result.exit_code == 0, result.output
    made = png_bytes(tmp_path / "out")
    assert sorted(made) == [
        "anim_000000.png", "anim_000001.png", "clip_000000.png", "clip_000001.png",
        "clip_000002.png", "plain.png", "still.png",
    ]  # fmt: skip
    assert made == each_file_alone(sorted(mixed.iterdir()), tmp_path / "alone")


def test_a_recursive_run_names_a_clip_by_its_sub_path(clips, tmp_path):
    """--recursive: a clip in a subfolder writes its frames under the same sub-path."""
    folder = tmp_path / "in"
    (folder / "day1").mkdir(parents=True)
    shutil.copy(clips / "a2.avi", folder / "day1" / "a2.avi")
    cv2.imwrite(str(folder / "top.jpg"), photo(10, 12))
    result = invoke("run", folder, "-o", tmp_path / "out", "--backend", "cpu", "-q", "--recursive")
    assert result.exit_code == 0, result.output
    assert sorted(png_bytes(tmp_path / "out")) == [
        "day1/a2_000000.png", "day1/a2_000001.png", "top.png",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "names, collides",
    [
        (["a.jpg", "a.mp4"], None),  # a.png and a_000000.png
        (["a.mp4", "a.mov"], ("a.mov", "a.mp4", "a_NNNNNN.png")),
        (["a_000001.jpg", "a.mp4"], ("a.mp4", "a_000001.jpg", "a_000001.png")),
    ],
)
def test_output_names_of_clips_in_a_folder_are_checked(clips, tmp_path, names, collides):
    """Clips found in a folder join the output-name check: two clips of one stem, or a clip
    and an image named as one of its frames, are refused before any work (exit 2)."""
    folder = tmp_path / "in"
    folder.mkdir()
    for name in names:
        if name.endswith(".jpg"):
            cv2.imwrite(str(folder / name), photo(10, 12))
        else:
            shutil.copy(clips / "b.mp4", folder / name)
    out = tmp_path / "out"
    result = invoke("run", folder, "-o", out, "--backend", "cpu", "-q")
    if collides is None:
        assert result.exit_code == 0, result.output
        assert sorted(png_bytes(out)) == ["a.png"] + [f"a_{i:06d}.png" for i in range(4)]
    else:
        first, second, name = collides
        assert result.exit_code == 2
        assert result.stderr == (
            f"Error: output name collision: {folder / first} and {folder / second} would both "
            f"write {name}; rename one or process them separately\n"
        )
        assert not out.exists()


@pytest.mark.parametrize(
    "extra",
    [["--start", "1", "--end", "3"], ["--every", "2"], ["--frames", "1"]],
    ids=["start-end", "every", "frames"],
)
def test_frame_selection_applies_to_clips_in_a_folder(clips, tmp_path, extra):
    """--start/--end/--every/--frames select the same frames of a clip found in a folder as of
    the clip given as a file."""
    result = invoke("run", clips, "-o", tmp_path / "out", "--backend", "cpu", "-q", *extra)
    assert result.exit_code == 0, result.output
    made = png_bytes(tmp_path / "out")
    assert made and made == each_file_alone(sorted(clips.iterdir()), tmp_path / "alone", *extra)


def test_shards_of_a_folder_of_clips_make_the_whole_run(clips, tmp_path):
    """--shard 0/2 and 1/2 of a folder of clips, into one folder, equal the whole run."""
    for shard in ("0/2", "1/2"):
        result = invoke("run", clips, "-o", tmp_path / "shards", "--backend", "cpu", "-q",
                        "--shard", shard)  # fmt: skip
        assert result.exit_code == 0, result.output
    edgecli.process(clips, tmp_path / "whole", backend="cpu")
    assert png_bytes(tmp_path / "shards") == png_bytes(tmp_path / "whole")


@pytest.fixture
def jpegs_and_clip(clips, tmp_path) -> Path:
    folder = tmp_path / "d"
    folder.mkdir()
    for i in range(2):
        cv2.imwrite(str(folder / f"f{i + 1}.jpg"), photo(20, 28, seed=i))
    shutil.copy(clips / "a2.avi", folder / "clip.avi")
    return folder


@pytest.mark.parametrize("skip_existing", [False, True])
def test_output_into_the_input_folder_again_and_again(jpegs_and_clip, tmp_path, skip_existing):
    """-o into the folder INPUT itself works every time (and with --skip-existing): the PNGs an
    earlier run wrote there are its outputs, not frames; the folder ends as a run elsewhere."""
    folder = jpegs_and_clip
    edgecli.process(folder, tmp_path / "elsewhere", backend="cpu")
    expected = png_bytes(tmp_path / "elsewhere")
    for _ in range(2):
        extra = ["--skip-existing"] if skip_existing else []
        result = invoke("run", folder, "-o", folder, "--backend", "cpu", "--json-summary", "-",
                        "-q", *extra)  # fmt: skip
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert summary["frames"] + summary["skipped_existing"] == 4  # 2 JPEGs, 2 clip frames
    assert png_bytes(folder) == expected


def test_output_into_the_current_folder(jpegs_and_clip, monkeypatch):
    """``cd d; edgecli run . -o .`` twice: both runs exit 0 and write the same PNGs."""
    monkeypatch.chdir(jpegs_and_clip)
    first = invoke("run", ".", "-o", ".", "--backend", "cpu", "-q")
    assert first.exit_code == 0, first.output
    made = png_bytes(jpegs_and_clip)
    second = invoke("run", ".", "-o", ".", "--backend", "cpu", "-q")
    assert second.exit_code == 0, second.output
    assert png_bytes(jpegs_and_clip) == made and len(made) == 4


def test_a_png_input_in_an_output_folder_is_still_an_input(jpegs_and_clip):
    """In a folder edgecli has written into, a PNG not named as another file's output is a
    frame: writing its edge map into the same folder is refused as overwriting it."""
    folder = jpegs_and_clip
    assert invoke("run", folder, "-o", folder, "--backend", "cpu", "-q").exit_code == 0
    cv2.imwrite(str(folder / "own.png"), photo(10, 12))
    before = (folder / "own.png").read_bytes()
    result = invoke("run", folder, "-o", folder, "--backend", "cpu", "-q")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {folder / 'own.png'}: the output of ")
    assert (folder / "own.png").read_bytes() == before


def test_a_recursive_run_leaves_out_earlier_output_folders_and_dot_folders(tmp_path):
    """--recursive does not read a subfolder holding an edgecli record (an earlier run's
    output), saying so once, nor a dot-folder (.git, .cache)."""
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    cv2.imwrite(str(folder / "top.jpg"), photo(10, 12))
    cv2.imwrite(str(folder / "sub" / "s.jpg"), photo(11, 13, seed=1))
    for hidden in (".git/objects/x.jpg", ".cache/y.png"):
        (folder / hidden).parent.mkdir(parents=True)
        cv2.imwrite(str(folder / hidden), photo(9, 9))
    earlier = invoke("run", folder, "-o", folder / "edges", "--backend", "cpu", "--recursive",
                     "-q")  # fmt: skip
    assert earlier.exit_code == 0, earlier.output
    assert sorted(png_bytes(folder / "edges")) == ["sub/s.png", "top.png"]
    assert (folder / "edges" / MANIFEST_NAME).is_file()
    result = invoke("run", folder, "-o", tmp_path / "out", "--backend", "cpu", "--recursive")
    assert result.exit_code == 0, result.output
    notice = f"edgecli: {folder / 'edges'}: left out, it holds edgecli's output ({MANIFEST_NAME})"
    assert result.stderr.count(notice) == 1
    assert sorted(png_bytes(tmp_path / "out")) == ["sub/s.png", "top.png"]


def test_an_empty_folder_names_every_extension_a_folder_takes(tmp_path):
    """A folder without frames: exit 1, the message listing video extensions too."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no frames")
    result = invoke("run", tmp_path / "empty", "-o", tmp_path / "out", "--backend", "cpu")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {tmp_path / 'empty'}: no frames in this folder")
    assert ".jpg" in result.stderr and ".mp4" in result.stderr and ".gif" in result.stderr
