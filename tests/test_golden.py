"""Golden manifests: a run's output folder is recorded by the decoded pixels of its PNGs, and
a later folder is checked against that record, frame by frame and option by option."""

from __future__ import annotations

import json

import cv2
import pytest

import edgecli
from edgecli.errors import EXIT_MISMATCH, ExpectationError, InputError
from edgecli.output import golden

from .helpers import make_frames

SHAPES = [(24, 32), (17, 31), (1, 9)]


@pytest.fixture
def frames(tmp_path):
    """An input folder of three frames, one more in a subfolder."""
    folder = make_frames(tmp_path / "in", SHAPES)
    make_frames(folder / "sub", [(20, 13)])
    return folder


def run(frames, out, **options):
    """Process ``frames`` into ``out`` on the CPU; the run's summary."""
    return edgecli.process(frames, out, backend="cpu", recursive=True, **options)


def manifest_of(out, summary) -> dict:
    return golden.build_manifest(out, summary.params, summary.decoders, edgecli.__version__)


@pytest.fixture
def made(frames, tmp_path):
    """An output folder, its run's summary and its manifest."""
    out = tmp_path / "out"
    summary = run(frames, out)
    return out, summary, manifest_of(out, summary)


def test_round_trip(made, tmp_path):
    """A written manifest reads back equal, lists exactly the PNGs (the subfolder's too, no
    dot-file) and leaves no temporary beside it."""
    out, summary, manifest = made
    cv2.imwrite(str(out / ".hidden.png"), cv2.imread(str(out / "f000.png")))
    manifest = manifest_of(out, summary)
    assert sorted(manifest["frames"]) == ["f000.png", "f001.png", "f002.png", "sub/f000.png"]
    pixels = {k: v for k, v in summary.params.items() if k != "png_bits"}  # bytes, not pixels
    assert manifest["params"] == pixels and manifest["decoders"] == summary.decoders
    assert manifest["edgecli_manifest"] == golden.MANIFEST_FORMAT
    path = tmp_path / "golden" / "golden.json"
    path.parent.mkdir()
    golden.write_manifest(path, manifest)
    assert [p.name for p in path.parent.iterdir()] == ["golden.json"]
    assert path.read_text().endswith("}\n")
    assert golden.read_manifest(path) == manifest


def test_same_folder_passes(made, tmp_path):
    """The folder a manifest was made from matches it, also once written and read back."""
    out, summary, manifest = made
    assert golden.compare(manifest, out, summary.params) == []
    path = tmp_path / "golden.json"
    golden.write_manifest(path, manifest)
    golden.check(path, out, summary.params)  # raises nothing


def test_changed_missing_and_extra_frames(made):
    """One pixel flipped, one file deleted, one added: each is named, and only it."""
    out, summary, manifest = made
    edges = cv2.imread(str(out / "f001.png"), cv2.IMREAD_UNCHANGED)
    edges[0, 0] = 255 - edges[0, 0]
    assert cv2.imwrite(str(out / "f001.png"), edges)
    assert golden.compare(manifest, out, summary.params) == ["differs: f001.png"]

    manifest = manifest_of(out, summary)
    (out / "sub" / "f000.png").unlink()
    assert golden.compare(manifest, out, summary.params) == ["missing: sub/f000.png"]

    manifest = manifest_of(out, summary)
    assert cv2.imwrite(str(out / "sub" / "new.png"), edges)
    assert golden.compare(manifest, out, summary.params) == ["extra: sub/new.png"]


def test_unreadable_output_differs(made):
    """An output truncated to nothing is listed as differing, not an end of the check."""
    out, summary, manifest = made
    (out / "f002.png").write_bytes(b"")
    assert golden.compare(manifest, out, summary.params) == ["differs: f002.png"]
    with pytest.raises(InputError, match="not a readable PNG"):
        golden.pixel_digest(out / "f002.png")


def test_png_bits_do_not_change_digests(frames, tmp_path):
    """1-bit and 8-bit PNGs of the same edge maps have other bytes but the same digests."""
    one, eight = tmp_path / "one", tmp_path / "eight"
    one_bit = manifest_of(one, run(frames, one, png_bits=1))
    eight_bit = manifest_of(eight, run(frames, eight, png_bits=8))
    assert (one / "f000.png").read_bytes() != (eight / "f000.png").read_bytes()
    assert one_bit["frames"] == eight_bit["frames"]


def test_bilevel_and_gray_png_digest_alike(made, tmp_path):
    """cv2 reads a 1-bit PNG as the uint8 0/255 image an 8-bit PNG of it holds."""
    out, _, _ = made
    edges = cv2.imread(str(out / "f000.png"), cv2.IMREAD_UNCHANGED)
    assert cv2.imwrite(str(tmp_path / "1.png"), edges, [cv2.IMWRITE_PNG_BILEVEL, 1])
    assert cv2.imwrite(str(tmp_path / "8.png"), edges)
    assert golden.pixel_digest(tmp_path / "1.png") == golden.pixel_digest(tmp_path / "8.png")


def test_other_options_are_named(made):
    """Changed and missing params make one first line naming each key with both values;
    the frames are still compared."""
    out, summary, manifest = made
    params = summary.params | {"threshold": 80, "norm": "l2", "extra_key": True}
    del params["border"]
    (out / "f000.png").unlink()
    assert golden.compare(manifest, out, params) == [
        "options differ: border missing (expected replicate), extra_key true (expected "
        "missing), norm l2 (expected l1), threshold 80 (expected 100)",
        "missing: f000.png",
    ]


@pytest.mark.parametrize(
    "content, reason",
    [
        (None, "cannot read manifest"),
        (b"\x89PNG not json", "not a manifest (not JSON)"),
        (b"[1, 2]", "not a manifest (not a JSON object)"),
        (b'{"frames": {}}', "not a manifest (no edgecli_manifest, edgecli_version, params"),
        ("format", "not a manifest (format 2, this edgecli reads format 1)"),
        ("frames", "not a manifest (frames is not an object of names to digests)"),
    ],
)
def test_not_a_manifest(made, tmp_path, content, reason):
    """A missing file, garbage, or JSON of another shape: InputError naming the file."""
    _, _, manifest = made
    path = tmp_path / "golden.json"
    if content == "format":
        content = json.dumps(manifest | {"edgecli_manifest": 2}).encode()
    elif content == "frames":
        content = json.dumps(manifest | {"frames": {"f000.png": 1}}).encode()
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InputError) as raised:
        golden.read_manifest(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: {reason}") and "\n" not in message


def test_check_raises_with_the_problems(made, tmp_path):
    """A mismatch is ExpectationError, exit 5, a one-line count and the list of problems."""
    out, summary, manifest = made
    path = tmp_path / "golden.json"
    golden.write_manifest(path, manifest)
    (out / "f001.png").unlink()
    with pytest.raises(ExpectationError) as raised:
        golden.check(path, out, summary.params)
    assert raised.value.exit_code == EXIT_MISMATCH == 5
    assert str(raised.value) == f"{path}: 1 of 4 outputs differ from the manifest"
    assert raised.value.problems == ["missing: f001.png"]

    params = summary.params | {"threshold": 80}
    with pytest.raises(ExpectationError) as raised:
        golden.check(path, out, params)
    assert str(raised.value) == (
        f"{path}: the options differ from the manifest's (threshold 80 (expected 100)), "
        "and 1 of 4 outputs differ"
    )
    assert raised.value.problems == [
        "options differ: threshold 80 (expected 100)",
        "missing: f001.png",
    ]


def test_other_threshold_differs(frames, made, tmp_path):
    """A run at threshold 60 against a manifest made at 100: the options line, then the
    frames whose pixels changed (the hash sees pixels)."""
    _, _, manifest = made
    out = tmp_path / "t60"
    summary = run(frames, out, threshold=60)
    problems = golden.compare(manifest, out, summary.params)
    assert problems[0] == "options differ: threshold 60 (expected 100)"
    assert problems[1:] and all(line.startswith("differs: ") for line in problems[1:])


# ---- the command line: --write-expected, then --expect -------------------------------------


def test_the_ci_recipe_passes_on_the_sample_frames_golden(tmp_path):
    """README's CI check: the committed manifest of sample_frames/ holds on this machine,
    with either PNG bit depth."""
    from .helpers import invoke
    from .media import REPO

    golden_path = REPO / "sample_frames" / "golden.json"
    for bits in ("1", "8"):
        out = tmp_path / f"out{bits}"
        result = invoke("run", REPO / "sample_frames", "-o", out, "--decode", "cpu", "-q",
                        "--png-bits", bits, "--expect", golden_path)  # fmt: skip
        assert result.exit_code == 0, result.output


def test_expect_fails_with_exit_5_naming_each_difference(tmp_path):
    from .helpers import invoke, make_frames

    folder = make_frames(tmp_path / "in", [(20, 30), (21, 31), (22, 32)])
    made = tmp_path / "golden.json"
    result = invoke("run", folder, "-o", tmp_path / "a", "-q", "--write-expected", made)
    assert result.exit_code == 0, result.output
    assert invoke("run", folder, "-o", tmp_path / "b", "-q", "--expect", made).exit_code == 0
    manifest = golden.read_manifest(made)
    manifest["frames"]["f001.png"] = "0" * 32
    del manifest["frames"]["f002.png"]
    manifest["frames"]["gone.png"] = "1" * 32
    golden.write_manifest(made, manifest)
    result = invoke("run", folder, "-o", tmp_path / "c", "-q", "--expect", made)
    assert result.exit_code == 5
    assert result.stderr.splitlines() == [
        "edgecli: differs: f001.png",
        "edgecli: extra: f002.png",
        "edgecli: missing: gone.png",
        f"Error: {made}: 3 of 4 outputs differ from the manifest",
    ]
    result = invoke("run", folder, "-o", tmp_path / "d", "-q", "-t", "90", "--expect", made)
    assert result.exit_code == 5
    assert result.stderr.splitlines()[0] == "edgecli: options differ: threshold 90 (expected 100)"


def test_expect_with_a_bad_manifest_fails_before_the_run(tmp_path):
    from .helpers import invoke, make_frames

    folder = make_frames(tmp_path / "in", [(20, 30)])
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    out = tmp_path / "out"
    result = invoke("run", folder, "-o", out, "--expect", bad)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {bad}: not a manifest (no ")
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--write-expected", "a.json", "--expect", "b.json"], "cannot be combined"),
        (["--write-expected", "a.json", "--shard", "0/2"], "run it without --shard"),
    ],
)
def test_golden_flags_that_cannot_work_are_usage_errors(tmp_path, args, message):
    from .helpers import invoke, make_frames

    folder = make_frames(tmp_path / "in", [(20, 30)])
    result = invoke("run", folder, "-o", tmp_path / "out", *args)
    assert result.exit_code == 2 and message in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()
