"""``-t auto`` and ``-t P%`` (edgecli.pipeline.threshold), checked against an independent
implementation of the documented rules: the contract's luma and Sobel by np.pad and slicing,
magnitudes by math.isqrt, Otsu as the between-class variance w0*w1*(mu0-mu1)^2 in exact fractions,
and the density rule by its definition; then through the command line, shards and a video."""

from __future__ import annotations

import json
import math
import random
import re
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest

import edgecli
from edgecli.decode.cpu import video_frames_at
from edgecli.edges import reference
from edgecli.errors import OptionError
from edgecli.inputs import sampling
from edgecli.inputs.sampling import sample_frames
from edgecli.inputs.sources import discover_inputs
from edgecli.options.params import BORDERS, NORMS, Options
from edgecli.pipeline import threshold

from .helpers import H264_CLIP, invoke
from .media import photo, read_frames

MAX_MAGNITUDE = 2040  # 2 * 4 * 255: the largest |Gx| + |Gy| of 8-bit luma
BINS = MAX_MAGNITUDE + 1
SAMPLE = 8  # frames -t auto and -t P% choose from

# ---------------------------------------------------------------------------------------------
# The independent implementation of the documented rules.

PADS = {
    "replicate": {"mode": "edge"},
    "reflect101": {"mode": "reflect"},
    "constant": {"mode": "constant", "constant_values": 0},
}


def my_luma(bgr: np.ndarray) -> np.ndarray:
    """Y = (9798R + 19235G + 3735B + 16384) >> 15, in int32."""
    b, g, r = (bgr[..., c].astype(np.int32) for c in range(3))
    return (9798 * r + 19235 * g + 3735 * b + 16384) >> 15


def my_sobel(y: np.ndarray, border: str) -> tuple[np.ndarray, np.ndarray]:
    """3x3 Sobel (Gx right minus left, Gy down minus up) by padding and slicing, in int32."""
    h, w = y.shape
    p = np.pad(y.astype(np.int32), 1, **PADS[border])

    def at(dy: int, dx: int) -> np.ndarray:
        return p[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

    gx = (at(-1, 1) - at(-1, -1)) + 2 * (at(0, 1) - at(0, -1)) + (at(1, 1) - at(1, -1))
    gy = (at(1, -1) - at(-1, -1)) + 2 * (at(1, 0) - at(-1, 0)) + (at(1, 1) - at(-1, 1))
    return gx, gy


def ceil_sqrt(value: int) -> int:
    root = math.isqrt(value)
    return root + (root * root < value)


def my_gradient_magnitude(gx: np.ndarray, gy: np.ndarray, norm: str) -> np.ndarray:
    gx, gy = gx.astype(np.int64), gy.astype(np.int64)
    if norm == "l1":
        return np.abs(gx) + np.abs(gy)
    squares = gx * gx + gy * gy
    unique, inverse = np.unique(squares, return_inverse=True)
    roots = np.array([ceil_sqrt(int(s)) for s in unique], dtype=np.int64)
    return roots[inverse].reshape(squares.shape)


def my_magnitudes(bgr: np.ndarray, norm: str, border: str) -> np.ndarray:
    return my_gradient_magnitude(*my_sobel(my_luma(bgr), border), norm)


def my_histogram(frames, norm: str, border: str) -> np.ndarray:
    counts = np.zeros(BINS, dtype=np.int64)
    for frame in frames:
        counts += np.bincount(my_magnitudes(frame, norm, border).ravel(), minlength=BINS)
    return counts


def my_otsu(counts) -> int:
    """argmax over T of w0 * w1 * (mu0 - mu1)^2 for {m <= T} and {m > T}, exactly; the
    smallest T on a tie; a histogram of one value: that value."""
    counts = [int(c) for c in counts]
    present = [v for v, c in enumerate(counts) if c]
    if len(present) == 1:
        return present[0]
    total = sum(counts)
    total_sum = sum(v * c for v, c in enumerate(counts))
    best, best_score = None, None
    n0 = s0 = 0
    for t, c in enumerate(counts):
        n0 += c
        s0 += t * c
        n1, s1 = total - n0, total_sum - s0
        if n0 == 0 or n1 == 0:
            continue
        w0, w1 = Fraction(n0, total), Fraction(n1, total)
        mu0, mu1 = Fraction(s0, n0), Fraction(s1, n1)
        score = w0 * w1 * (mu0 - mu1) ** 2
        if best_score is None or score > best_score:
            best, best_score = t, score
    return best


def my_density(counts, percent: Fraction) -> int:
    """The smallest T for which the share of pixels with m > T is at most percent / 100."""
    counts = [int(c) for c in counts]
    total = sum(counts)
    above = total
    for t, c in enumerate(counts):
        above -= c
        if Fraction(above, total) <= percent / 100:
            return t
    raise AssertionError("unreachable: no pixel is above the last bin")


def my_positions(total: int, count: int) -> list[int]:
    """The k-th of ``count`` sampled frames of ``total`` is frame (2k + 1) * total // (2 count)."""
    return sorted({(2 * k + 1) * total // (2 * count) for k in range(count)})


# ---------------------------------------------------------------------------------------------
# 1. edgecli.pipeline.threshold against the independent implementation.

SHAPES = [(1, 1), (1, 23), (19, 1), (17, 31), (240, 320)]
PERCENTS = [Fraction(0), Fraction(1, 2), Fraction(5), Fraction(25, 2), Fraction(50), Fraction(100)]


def noise(h: int, w: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def frames_for(kind: str) -> list[np.ndarray]:
    if kind == "photos":
        return [photo(h, w, seed=i) for i, (h, w) in enumerate(SHAPES)]
    if kind == "noise":
        return [noise(37, 53, 7), noise(1, 9, 8), noise(6, 1, 9)]
    return [np.full((13, 29, 3), (40, 200, 90), dtype=np.uint8)]  # flat


def check_rules(counts: np.ndarray) -> None:
    assert threshold.otsu(counts) == my_otsu(counts)
    for percent in PERCENTS:
        assert threshold.density(counts, percent) == my_density(counts, percent), percent


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("kind", ["photos", "noise", "flat"])
def test_rules_match_an_independent_implementation(kind, norm, border):
    """magnitudes, histogram, otsu and density equal the documented rules computed another
    way, frame by frame and over all the frames together, for every norm and border."""
    frames = frames_for(kind)
    for frame in frames:
        mine = my_magnitudes(frame, norm, border)
        theirs = threshold.magnitudes(frame, norm, border)
        assert theirs.shape == frame.shape[:2]
        assert np.issubdtype(theirs.dtype, np.integer)
        assert np.array_equal(theirs, mine), frame.shape
        assert 0 <= mine.min() and mine.max() <= MAX_MAGNITUDE
        counts = threshold.histogram([frame], norm, border)
        assert counts.shape == (BINS,) and counts.dtype == np.int64
        assert np.array_equal(counts, my_histogram([frame], norm, border))
        check_rules(counts)
    counts = threshold.histogram(frames, norm, border)
    assert np.array_equal(counts, my_histogram(frames, norm, border))
    assert counts.sum() == sum(f.shape[0] * f.shape[1] for f in frames)
    check_rules(counts)


def test_flat_frame_has_no_split():
    """A flat frame (replicate or reflect101 border) has one magnitude, 0: Otsu picks 0, which
    marks no pixel; under the constant border its rim has gradients."""
    flat = frames_for("flat")
    for border in ("replicate", "reflect101"):
        counts = threshold.histogram(flat, "l1", border)
        assert counts[0] == counts.sum() and threshold.otsu(counts) == 0
    assert threshold.histogram(flat, "l1", "constant")[1:].sum() > 0


@pytest.mark.parametrize("value", [0, 1, 37, 1020, 2040])
def test_one_valued_histogram_is_its_value(value):
    counts = np.zeros(BINS, dtype=np.int64)
    counts[value] = 12345
    assert threshold.otsu(counts) == my_otsu(counts) == value
    assert threshold.density(counts, Fraction(0)) == value
    assert threshold.edge_share(counts, value) == 0.0
    if value:
        assert threshold.edge_share(counts, value - 1) == 1.0


def test_rules_on_hand_made_histograms():
    """Otsu and density on histograms no image need give: two equal spikes (every T between
    them ties: the smallest wins), sparse and dense random ones."""
    two = np.zeros(BINS, dtype=np.int64)
    two[[10, 500]] = 7
    assert threshold.otsu(two) == my_otsu(two) == 10
    assert threshold.density(two, Fraction(50)) == my_density(two, Fraction(50)) == 10
    assert threshold.density(two, Fraction(49)) == 500
    rng = np.random.default_rng(99)
    for trial in range(12):
        counts = np.zeros(BINS, dtype=np.int64)
        spots = rng.choice(BINS, size=int(rng.integers(2, 40)), replace=False)
        counts[spots] = rng.integers(1, 10**6 if trial % 2 else 5, size=spots.size)
        check_rules(counts)
    dense = rng.integers(0, 1000, size=BINS).astype(np.int64)
    check_rules(dense)


# ---------------------------------------------------------------------------------------------
# 2. The magnitude's defining property: m > T exactly where the contract marks an edge.


def random_gradients(n: int = 20000, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gx = rng.integers(-1020, 1021, size=n).astype(np.int16)
    gy = rng.integers(-1020, 1021, size=n).astype(np.int16)
    # The extremes, axes, and squares at and just around perfect squares.
    special = [(1020, 1020), (-1020, -1020), (1020, -1020), (0, 0), (0, 1020), (-1020, 0)]
    special += [(3, 4), (4, 3), (600, 800), (1, 1), (1, 0), (719, 720), (720, 720), (0, 1)]
    sx, sy = np.array(special, dtype=np.int16).T
    return np.concatenate([sx, gx]), np.concatenate([sy, gy])


THRESHOLDS = sorted({0, 1, 2, 3, 99, 100, 101, 1019, 1020, 1021, 1442, 1443, 2039, 2040}
                    | set(range(0, 2041, 37)))  # fmt: skip


@pytest.mark.parametrize("norm", NORMS)
def test_magnitude_is_exact_for_any_gradient(norm, monkeypatch):
    """The product's magnitude of arbitrary int16 gradients in [-1020, 1020] (fed in place of
    the Sobel filter's) is |Gx| + |Gy| or ceil(sqrt(Gx^2 + Gy^2)), and m > T exactly where
    |Gx| + |Gy| > T or Gx^2 + Gy^2 > T^2, for T from 0 to 2040."""
    gx, gy = random_gradients()
    monkeypatch.setattr(reference, "sobel", lambda y, border: (gx.copy(), gy.copy()))
    m = threshold.magnitudes(np.zeros((1, gx.size, 3), dtype=np.uint8), norm, "replicate")
    m = np.asarray(m).ravel().astype(np.int64)
    assert np.array_equal(m, my_gradient_magnitude(gx, gy, norm))
    x, y = gx.astype(np.int64), gy.astype(np.int64)
    for t in THRESHOLDS:
        contract = (np.abs(x) + np.abs(y) > t) if norm == "l1" else (x * x + y * y > t * t)
        assert np.array_equal(m > t, contract), t


@pytest.mark.parametrize("norm", NORMS)
def test_reference_threshold_is_magnitude_above_t(norm):
    """reference.threshold_magnitude at T is 255 exactly where the magnitude exceeds T
    (T past 2040 is clamped there, and marks nothing, as 2040 does)."""
    frame = photo(48, 64, seed=3)
    gx, gy = reference.sobel(reference.luma(frame), "reflect101")
    m = my_magnitudes(frame, norm, "reflect101")
    for t in (0, 1, 50, 100, 300, 1020, 2040, 5000):
        got = reference.threshold_magnitude(gx, gy, Options(threshold=t, norm=norm))
        assert np.array_equal(got, (m > t).astype(np.uint8) * 255), t


# ---------------------------------------------------------------------------------------------
# 3. Which frames are sampled.


@pytest.mark.parametrize("count", [1, 2, 3, 8, 10])
def test_sample_positions(count):
    """count distinct sorted positions in range, at (2k + 1) * total // (2 count); every frame
    where there are fewer than count; none of none."""
    assert sampling.sample_positions(0, count) == []
    for total in [*range(1, 40), 97, 1000, 123457]:
        got = sampling.sample_positions(total, count)
        assert got == my_positions(total, count), total
        assert got == sorted(set(got)) and all(0 <= p < total for p in got)
        assert len(got) == min(total, count)
        if total < count:
            assert got == list(range(total))
        else:  # evenly spread: the k-th is the middle of the k-th 1/count of the run, rounded down
            for k, position in enumerate(got):
                assert k * total // count <= position and position * count < (k + 1) * total
                assert position * 2 * count <= (2 * k + 1) * total < (position + 1) * 2 * count


def test_sample_positions_default_is_eight():
    assert threshold.AUTO_SAMPLE == SAMPLE
    assert sampling.sample_positions(24, threshold.AUTO_SAMPLE) == [1, 4, 7, 10, 13, 16, 19, 22]


# ---------------------------------------------------------------------------------------------
# 4. The frames' order does not matter.


@pytest.mark.parametrize("norm", NORMS)
def test_histogram_ignores_frame_order(norm):
    frames = [photo(30 + 7 * i, 41 - 3 * i, seed=i) for i in range(6)] + [noise(20, 20, 3)]
    counts = threshold.histogram(frames, norm, "replicate")
    shuffler = random.Random(17)
    for _ in range(4):
        order = frames[:]
        shuffler.shuffle(order)
        again = threshold.histogram(order, norm, "replicate")
        assert np.array_equal(again, counts)
        assert threshold.otsu(again) == threshold.otsu(counts)
        assert threshold.density(again, Fraction(5)) == threshold.density(counts, Fraction(5))


# ---------------------------------------------------------------------------------------------
# 5-7. Through the command line and the library.

NOTICE = re.compile(
    r"^edgecli: -t (\S+): threshold (\d+) \((.*), from (\d+) frame\(s\) spread over the "
    r"input; ([0-9.]+)% of their pixels are edges\)$",
    re.MULTILINE,
)


def make_folder(folder: Path, count: int) -> list[np.ndarray]:
    """``count`` frames of assorted sizes as PNGs f000.png... (lossless: what is read back is
    what was written); returns them in name order."""
    folder.mkdir(parents=True)
    frames = []
    for i in range(count):
        frame = photo(20 + (5 * i) % 23, 26 + (7 * i) % 19, seed=i)
        assert cv2.imwrite(str(folder / f"f{i:03d}.png"), frame)
        frames.append(frame)
    return frames


def pngs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}


def notice(stderr: str) -> re.Match:
    found = NOTICE.findall(stderr)
    assert len(found) == 1, stderr
    return NOTICE.search(stderr)


def run_rule(folder, out, rule, summary, *extra):
    result = invoke(
        "run", folder, "-o", out, "-t", rule, "--backend", "cpu", "--json-summary", summary,
        *extra,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def eleven(tmp_path_factory) -> tuple[Path, list[np.ndarray]]:
    folder = tmp_path_factory.mktemp("eleven") / "frames"
    return folder, make_folder(folder, 11)


@pytest.mark.parametrize("count", [11, 3])
def test_auto_from_the_command_line(count, eleven, tmp_path):
    """-t auto: the notice names the threshold, the summary records it and the rule, it is
    Otsu's threshold of the sampled frames (all of a folder of fewer than 8), and -t with that
    number writes the same bytes."""
    if count == 11:
        folder, frames = eleven
    else:
        folder = tmp_path / "frames"
        frames = make_folder(folder, count)
    result = run_rule(folder, tmp_path / "out", "auto", tmp_path / "s.json")
    found = notice(result.stderr)
    assert found.group(1) == "auto" and found.group(3) == "Otsu"
    chosen = int(found.group(2))
    sampled = [frames[p] for p in my_positions(len(frames), SAMPLE)]
    assert int(found.group(4)) == len(sampled) == min(count, SAMPLE)
    counts = my_histogram(sampled, "l1", "replicate")
    assert chosen == my_otsu(counts)
    share = 100 * counts[chosen + 1 :].sum() / counts.sum()
    assert found.group(5) == f"{share:.2f}"
    params = json.loads((tmp_path / "s.json").read_text())["params"]
    assert type(params["threshold"]) is int and params["threshold"] == chosen
    assert params["threshold_rule"] == "auto"

    again = invoke("run", folder, "-o", tmp_path / "out2", "-t", chosen, "--backend", "cpu")
    assert again.exit_code == 0, again.output
    assert "-t auto" not in again.stderr
    written = pngs(tmp_path / "out")
    assert len(written) == count and written == pngs(tmp_path / "out2")


@pytest.mark.parametrize("norm, border", [("l2", "reflect101"), ("l1", "constant")])
def test_auto_with_other_norm_and_border(norm, border, eleven, tmp_path):
    folder, frames = eleven
    result = run_rule(
        folder, tmp_path / "out", "auto", tmp_path / "s.json", "--norm", norm, "--border", border
    )
    sampled = [frames[p] for p in my_positions(len(frames), SAMPLE)]
    assert int(notice(result.stderr).group(2)) == my_otsu(my_histogram(sampled, norm, border))


def test_percent_from_the_command_line(eleven, tmp_path):
    """-t 5%: the threshold marks at most 5% of the sampled pixels, one less would mark more."""
    folder, frames = eleven
    result = run_rule(folder, tmp_path / "out", "5%", tmp_path / "s.json")
    found = notice(result.stderr)
    assert found.group(1) == "5%" and found.group(3) == "at most 5% edge pixels"
    chosen = int(found.group(2))
    sampled = [frames[p] for p in my_positions(len(frames), SAMPLE)]
    m = np.concatenate([my_magnitudes(f, "l1", "replicate").ravel() for f in sampled])
    assert Fraction(int((m > chosen).sum()), m.size) <= Fraction(5, 100)
    if chosen > 0:
        assert Fraction(int((m > chosen - 1).sum()), m.size) > Fraction(5, 100)
    assert chosen == my_density(my_histogram(sampled, "l1", "replicate"), Fraction(5))
    params = json.loads((tmp_path / "s.json").read_text())["params"]
    assert params["threshold"] == chosen and params["threshold_rule"] == "5%"
    # And the PNGs are those of that number.
    again = invoke("run", folder, "-o", tmp_path / "out2", "-t", chosen, "--backend", "cpu")
    assert again.exit_code == 0 and pngs(tmp_path / "out") == pngs(tmp_path / "out2")


def test_shards_choose_the_run_threshold(eleven, tmp_path):
    """Each shard of -t auto chooses from the whole run's frames: the same threshold as the
    unsharded run, and the shards together write its bytes."""
    folder, _ = eleven
    whole = edgecli.process(folder, tmp_path / "whole", threshold="auto", backend="cpu")
    assert whole.params["threshold_rule"] == "auto"
    chosen = whole.params["threshold"]
    assert type(chosen) is int
    for i in range(2):
        part = edgecli.process(
            folder, tmp_path / "parts", threshold="auto", shard=(i, 2), backend="cpu"
        )
        assert part.params["threshold"] == chosen and part.params["threshold_rule"] == "auto"
        assert 0 < part.frames < 11
    written = pngs(tmp_path / "whole")
    assert len(written) == 11 and pngs(tmp_path / "parts") == written


def test_shards_from_the_command_line(eleven, tmp_path):
    folder, _ = eleven
    result = run_rule(folder, tmp_path / "whole", "auto", tmp_path / "w.json")
    chosen = int(notice(result.stderr).group(2))
    for i in range(2):
        part = run_rule(folder, tmp_path / "parts", "auto", tmp_path / f"p{i}.json", "--shard",
                        f"{i}/2")  # fmt: skip
        assert int(notice(part.stderr).group(2)) == chosen
        assert json.loads((tmp_path / f"p{i}.json").read_text())["params"]["threshold"] == chosen
    assert pngs(tmp_path / "parts") == pngs(tmp_path / "whole")


# ---------------------------------------------------------------------------------------------
# 8. Bad values.


@pytest.mark.parametrize(
    "value", ["abc", "101%", "-1", "5", "%", "-5%", "1e3", "auto5", "\u00b2", "--5"]
)
def test_bad_thresholds_are_usage_errors(value, tmp_path):
    folder = tmp_path / "frames"
    make_folder(folder, 1)
    result = invoke("run", folder, "-o", tmp_path / "out", "-t", value, "--backend", "cpu")
    if value == "5":  # the one good value, for contrast
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[-1].startswith(
        "Error: Invalid value for '-t' / '--threshold'"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", ["AUTO", " auto ", "0%", "100%", "2.5%", ".5%", "5.%"])
def test_good_rules_are_accepted(value):
    assert threshold.parse_rule(value) is not None
    Options(threshold=value)


@pytest.mark.parametrize("value", ["abc", "101%", "100.01%", "-1%", "", "auto%", "5 %"])
def test_library_refuses_bad_rules(value):
    with pytest.raises(OptionError):
        Options(threshold=value)


def test_library_refuses_bad_numbers():
    for value in (-1, 2.5, True):
        with pytest.raises(OptionError):
            Options(threshold=value)


def test_rule_has_no_effective_threshold():
    for rule in ("auto", "5%"):
        with pytest.raises(OptionError):
            Options(threshold=rule).effective_threshold  # noqa: B018
    assert Options(threshold=9000).effective_threshold == MAX_MAGNITUDE


def test_resolve_leaves_a_number_alone():
    options = Options(threshold=42)
    assert threshold.resolve(options, [], notify=pytest.fail) is options


# ---------------------------------------------------------------------------------------------
# 9. A video: the sampled frames are reached by seeking.


@pytest.fixture(scope="module")
def clip_frames() -> list[np.ndarray]:
    frames = read_frames(H264_CLIP)
    assert len(frames) == 24
    return frames


def test_a_sampled_frame_lands_on_the_frame(clip_frames):
    """Seeking to each sampled frame gives the frame a decode from the start gives there."""
    positions = my_positions(24, SAMPLE)
    assert positions == [1, 4, 7, 10, 13, 16, 19, 22]
    for p in positions:
        got = video_frames_at(H264_CLIP, [p], 1 << 30)[p]
        assert np.array_equal(got, clip_frames[p]), p


def test_auto_on_a_video(clip_frames, tmp_path):
    result = run_rule(H264_CLIP, tmp_path / "out", "auto", tmp_path / "s.json")
    found = notice(result.stderr)
    assert int(found.group(4)) == SAMPLE
    sampled = [clip_frames[p] for p in my_positions(24, SAMPLE)]
    chosen = int(found.group(2))
    assert chosen == my_otsu(my_histogram(sampled, "l1", "replicate"))
    params = json.loads((tmp_path / "s.json").read_text())["params"]
    assert params["threshold"] == chosen and params["threshold_rule"] == "auto"
    assert len(pngs(tmp_path / "out")) == 24


def test_sample_frames_of_a_video_are_its_frames(clip_frames):
    """sample_frames (edgecli.inputs.sampling) gives the clip's frames 1, 4, ..., 22, pixel for
    pixel."""
    sampled = sample_frames(discover_inputs([H264_CLIP]), SAMPLE, 1 << 30)
    assert len(sampled) == SAMPLE
    for frame, p in zip(sampled, my_positions(24, SAMPLE), strict=True):
        assert np.array_equal(frame.pixels, clip_frames[p]), p


@pytest.mark.parametrize(
    "extra, kept",
    [
        (["--start", "5", "--every", "3"], range(5, 24, 3)),  # 7 frames: all sampled
        (["--start", "2", "--frames", "20"], range(2, 22)),
        (["--end", "12"], range(12)),
    ],
)
def test_auto_samples_the_selected_frames(extra, kept, clip_frames, tmp_path):
    """With --start/--end/--every/--frames, the sample is spread over the frames kept."""
    result = run_rule(H264_CLIP, tmp_path / "out", "auto", tmp_path / "s.json", *extra)
    found = notice(result.stderr)
    kept = list(kept)
    sampled = [clip_frames[kept[p]] for p in my_positions(len(kept), SAMPLE)]
    assert int(found.group(4)) == len(sampled)
    assert int(found.group(2)) == my_otsu(my_histogram(sampled, "l1", "replicate"))
    assert len(pngs(tmp_path / "out")) == len(kept)


def test_auto_over_several_inputs(clip_frames, tmp_path):
    """Several INPUTs: the sample is spread over all their frames, in the order given."""
    folder = tmp_path / "frames"
    stills = make_folder(folder, 3)
    result = run_rule(folder, tmp_path / "out", "auto", tmp_path / "s.json", H264_CLIP)
    everything = stills + clip_frames
    sampled = [everything[p] for p in my_positions(len(everything), SAMPLE)]
    found = notice(result.stderr)
    assert int(found.group(4)) == SAMPLE
    assert int(found.group(2)) == my_otsu(my_histogram(sampled, "l1", "replicate"))
