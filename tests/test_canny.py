"""Canny (``--operator canny``): the plain reference in tests/canny_reference.py equals
cv2.Canny; the CPU backend, on either of its paths, equals the reference byte for byte on
photos, odd shapes, a 4K frame, both norms, thresholds from 0 to past every magnitude, swapped
and fractional ones, and the adversarial images of tests/canny_images.py; cv2.Canny is used
only where a check per OpenCV build finds it exact; and the options that choose all this."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

import edgecli
from edgecli import OptionError, Options
from edgecli.edges import canny
from edgecli.options.params import INT32_MAX
from edgecli.output.cache import opencv_build_key
from tests import canny_images, canny_reference

from .media import SAMPLE_FRAMES, photo

REAL_CANNY = cv2.Canny
# (low, high) as cv2.Canny takes them: zero, from 0 to past every magnitude, swapped,
# fractional (floored; squared then floored under l2, up to the largest l2 magnitude), equal.
THRESHOLDS = [(0, 0), (0, 5000), (5000, 5000), (50, 150), (150, 50), (10.5, 30.25),
              (1442.5, 1442.9), (37, 37), (1, 2)]  # fmt: skip


# 1xN, Nx1 and the smallest shapes, and sizes no tile of 16 or 32 divides.
ODD_SHAPES = [(1, 1), (1, 37), (37, 1), (2, 2), (3, 3), (17, 31), (33, 65), (130, 257)]


def photos() -> dict[str, np.ndarray]:
    """The sample frames, BGR, by name."""
    return {p.name: cv2.imread(str(p)) for p in sorted(SAMPLE_FRAMES.glob("pan_*"))[:4]}


def frames() -> dict[str, np.ndarray]:
    """BGR frames of every kind the backends must agree on, by name."""
    rng = np.random.default_rng(42)
    shaped = {f"{h}x{w}": photo(h, w, seed=h + w) for h, w in ODD_SHAPES}
    shaped["noise 61x47"] = rng.integers(0, 256, (61, 47, 3), dtype=np.uint8)
    adversarial = {
        "spiral 96x128": canny_images.spiral(96, 128),
        "checkerboard 70x90": canny_images.checkerboard(70, 90),
        "noise gray 80x80": canny_images.noise(80, 80, seed=3),
    }
    return photos() | shaped | {k: canny_images.as_bgr(v) for k, v in adversarial.items()}


FRAMES = frames()


@pytest.fixture(params=["opencv threads", "one thread"])
def cv2_threads(request):
    """cv2 on its own threads (the default), and single-threaded (where it takes Intel IPP's
    code, in builds that have it)."""
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1 if request.param == "one thread" else threads)
    yield
    cv2.setNumThreads(threads)


# 1. The reference ------------------------------------------------------------------------


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("name", list(FRAMES))
def test_reference_equals_cv2_canny(name, norm, cv2_threads):
    """The plain reference equals cv2.Canny on the contract's luma, at every threshold pair,
    negative and past the clamps included."""
    gray = canny_reference.luma(FRAMES[name])
    l2 = norm == "l2"
    for low, high in THRESHOLDS + [(-5, 20), (1e12, 1e12), (40000, 3)]:
        expected = REAL_CANNY(gray, low, high, apertureSize=3, L2gradient=l2)
        actual = canny_reference.canny(gray, low, high, l2)
        assert np.array_equal(actual, expected), f"{name} {norm} ({low}, {high})"


def test_reference_equals_cv2_canny_on_adversarial_4k():
    """The reference equals cv2.Canny on a 4K spiral, the longest hysteresis path tested."""
    gray = canny_images.spiral(2160, 3840, pitch=64)
    low, high = canny_images.ADVERSARIAL_LIMITS
    assert np.array_equal(canny_reference.canny(gray, low, high), REAL_CANNY(gray, low, high))


# 2. The CPU backend ----------------------------------------------------------------------


@pytest.fixture(params=["cv2.Canny", "numpy"])
def cpu_path(request, monkeypatch):
    """The CPU backend as it runs where cv2.Canny is verified exact, and where it is not."""
    if request.param == "numpy":
        monkeypatch.setattr(canny, "cv2_canny_is_exact", lambda: False)
    return request.param


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("name", list(FRAMES))
def test_cpu_backend_equals_reference(name, norm, cpu_path, cv2_threads):
    """edgecli.detect_edges(operator='canny') on the CPU equals the reference, byte for byte,
    at every threshold pair, on either path and thread setting."""
    frame = FRAMES[name]
    for low, high in THRESHOLDS:
        expected = canny_reference.canny_bgr(frame, low, high, norm == "l2")
        actual = edgecli.detect_edges(
            frame, operator="canny", threshold=(low, high), norm=norm, backend="cpu"
        )
        assert actual.dtype == np.uint8 and actual.shape == frame.shape[:2]
        assert np.array_equal(actual, expected), f"{name} {norm} ({low}, {high}) {cpu_path}"


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_cpu_backend_equals_reference_at_4k(norm, cpu_path):
    """A 4K photo (sizes no tile or thread slice divides evenly) equals the reference."""
    frame = cv2.resize(photo(237, 321), (3840, 2160), interpolation=cv2.INTER_LINEAR)
    frame[::7, ::5] = 255 - frame[::7, ::5]  # detail at every scale
    expected = canny_reference.canny_bgr(frame, 60, 140, norm == "l2")
    actual = edgecli.detect_edges(
        frame, operator="canny", threshold=(140, 60), norm=norm, backend="cpu"
    )
    assert np.array_equal(actual, expected)


def test_cpu_backend_batches_frames_of_one_shape(cpu_path):
    """A batch (N, H, W, 3) gives each frame's own edges."""
    batch = np.stack([photo(45, 67, seed=k) for k in range(3)])
    edges = edgecli.detect_edges(batch, operator="canny", threshold=(30, 90), backend="cpu")
    for frame, actual in zip(batch, edges, strict=True):
        assert np.array_equal(actual, canny_reference.canny_bgr(frame, 30, 90))


@pytest.mark.gpu
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_cuda_backend_equals_reference(gpu, norm):
    """The CUDA backend's Canny equals the reference on every frame and threshold pair the
    CPU backend is tested on, and on a batch of frames of one shape."""
    for name, frame in FRAMES.items():
        for low, high in THRESHOLDS:
            expected = canny_reference.canny_bgr(frame, low, high, norm == "l2")
            actual = edgecli.detect_edges(
                frame, operator="canny", threshold=(low, high), norm=norm, backend="cuda"
            )
            assert np.array_equal(actual, expected), f"{name} {norm} ({low}, {high})"
    batch = np.stack([photo(45, 67, seed=k) for k in range(5)])
    edges = edgecli.detect_edges(batch, operator="canny", threshold=(30, 90), norm=norm,
                                 backend="cuda")  # fmt: skip
    for frame, actual in zip(batch, edges, strict=True):
        assert np.array_equal(actual, canny_reference.canny_bgr(frame, 30, 90, norm == "l2"))


def test_spiral_is_a_long_chain_from_a_few_strong_pixels():
    """The spiral's edges, more than a fifth of the frame's pixels, are all reached from at
    most 8 strong pixels at its inner end: the hysteresis must walk the spiral's length."""
    gray = canny_images.spiral(200, 240)
    low, high = canny_images.ADVERSARIAL_LIMITS
    dx, dy = canny_reference.gradients(gray)
    m = np.abs(dx) + np.abs(dy)
    strong = canny_reference.candidates(dx, dy, m, low) & (m > high)
    rows, cols = np.nonzero(strong)
    assert 1 <= rows.size <= 8
    assert abs(rows.mean() - 100) < 10 and abs(cols.mean() - 120) < 30  # the inner end
    edges = canny_reference.canny(gray, low, high)
    assert np.count_nonzero(edges) > 200 * 240 // 5


# 3. cv2.Canny only where verified --------------------------------------------------------


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache folder, and no verdict remembered by this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    canny.cv2_canny_is_exact.cache_clear()
    yield tmp_path / "cache" / "edgecli"
    canny.cv2_canny_is_exact.cache_clear()


def wrong_when_single_threaded(image, low, high, **kwargs):
    """cv2.Canny, but with its last pixel flipped when OpenCV runs on one thread: a defect
    of one code path only."""
    edges = REAL_CANNY(image, low, high, **kwargs)
    if cv2.getNumThreads() == 1:
        edges[-1, -1] ^= 255
    return edges


def test_verdict_is_cached_per_opencv_build(fresh_cache):
    """The first Canny backend checks cv2.Canny and caches the verdict under this OpenCV's
    build, beside other builds' verdicts; OpenCV's thread count is as it was."""
    fresh_cache.mkdir(parents=True)
    (fresh_cache / canny.CACHE_FILE).write_text('{"opencv 4.0.0 build x cpu y": false}')
    threads = cv2.getNumThreads()
    frame = photo(31, 47)
    edges = edgecli.detect_edges(frame, operator="canny", threshold=(20, 60), backend="cpu")
    assert np.array_equal(edges, canny_reference.canny_bgr(frame, 20, 60))
    verdicts = json.loads((fresh_cache / canny.CACHE_FILE).read_text())
    assert verdicts.keys() == {"opencv 4.0.0 build x cpu y", opencv_build_key()}
    assert verdicts["opencv 4.0.0 build x cpu y"] is False
    assert verdicts[opencv_build_key()] is canny.cv2_canny_is_exact()
    assert cv2.getNumThreads() == threads


def test_canny_that_differs_on_one_path_is_not_used(fresh_cache, monkeypatch):
    """Where cv2.Canny differs from the steps on its single-threaded path only, the check
    says so, the verdict cached is False, and the edges still equal the reference."""
    monkeypatch.setattr(cv2, "Canny", wrong_when_single_threaded)
    assert canny.check_cv2_canny() is False
    frame = photo(40, 50)
    cv2.setNumThreads(1)
    try:
        edges = edgecli.detect_edges(frame, operator="canny", threshold=(0, 0), backend="cpu")
    finally:
        cv2.setNumThreads(-1)
    assert np.array_equal(edges, canny_reference.canny_bgr(frame, 0, 0))
    assert json.loads((fresh_cache / canny.CACHE_FILE).read_text()) == {opencv_build_key(): False}


def test_cached_false_verdict_is_honoured(fresh_cache, monkeypatch):
    """A cached 'not exact' verdict keeps cv2.Canny out, without a re-check."""
    fresh_cache.mkdir(parents=True)
    (fresh_cache / canny.CACHE_FILE).write_text(json.dumps({opencv_build_key(): False}))
    monkeypatch.setattr(cv2, "Canny", lambda image, *a, **k: np.zeros(image.shape, np.uint8))
    frame = photo(20, 30)
    edges = edgecli.detect_edges(frame, operator="canny", threshold=(10, 30), backend="cpu")
    assert np.array_equal(edges, canny_reference.canny_bgr(frame, 10, 30))


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_cv2_compares_at_exactly_the_limits(norm, cv2_threads):
    """cv2.Canny, given cv2_thresholds, compares with exactly the limits: at L = v - 1 and
    L = v for every magnitude v of an image with large and small gradients, low = high = L,
    it equals the steps in NumPy (which compare m > L), single-threaded and threaded."""
    rng = np.random.default_rng(5)
    gray = rng.integers(0, 256, (40, 40), dtype=np.uint8)
    gray[::3] = rng.integers(0, 2, (14, 40), dtype=np.uint8) * 255
    l2 = norm == "l2"
    dx, dy = canny.sobel_replicate(gray)
    magnitudes = np.unique(canny.magnitude(dx, dy, l2))
    for limit in sorted({int(v) + d for v in magnitudes for d in (-1, 0)} - {-1}):
        expected = canny.canny_numpy(gray, limit, limit, l2)
        actual = REAL_CANNY(gray, *canny.cv2_thresholds(limit, limit, l2), L2gradient=l2)
        assert np.array_equal(actual, expected), limit


# 4. Options ----------------------------------------------------------------------------


@pytest.mark.parametrize("l2", [False, True])
def test_canny_limits_are_canny_cpps_arithmetic(l2):
    """Options.canny_limits equals the reference's arithmetic (swap, clamp and square under
    l2, floor), capped at the int32 maximum where canny.cpp's floor would overflow."""
    values = [0, 1, 2, 10.5, 30.25, 37, 0.999, 1442.5, 1442.9, 2040, 5000, 32767, 32767.5,
              40000, 2**31 - 1, 2**31, 10**30, 1e300]  # fmt: skip
    for low in values:
        for high in values:
            expected = tuple(min(t, INT32_MAX) for t in canny_reference.limits(low, high, l2))
            options = Options(operator="canny", threshold=(low, high), norm="l2" if l2 else "l1")
            assert options.canny_limits == expected, (low, high)


def test_canny_limits_by_hand():
    """Known limits: swapped, floored, squared under l2, clamped to 32767 before the square."""
    assert Options(operator="canny", threshold=(150, 50)).canny_limits == (50, 150)
    assert Options(operator="canny", threshold=(10.5, 30.7)).canny_limits == (10, 30)
    l2 = Options(operator="canny", threshold=(10.5, 30.7), norm="l2")
    assert l2.canny_limits == (110, 942)
    assert Options(operator="canny", threshold=(1, 40000), norm="l2").canny_limits == (
        1, 32767**2,
    )  # fmt: skip


def test_defaults_follow_the_operator():
    """No threshold (None) is the operator's default: 100 for sobel, (100, 200) for canny."""
    assert Options().threshold == Options(threshold=None).threshold == 100
    assert Options(operator="canny").threshold == (100, 200)
    assert Options(operator="canny", threshold=[5, 6]).threshold == (5, 6)  # as JSON gives it


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"operator": "prewitt"}, "operator must be one of 'sobel', 'canny', got 'prewitt'"),
        ({"threshold": (50, 150)},
         "threshold 50,150 is a pair (low, high), which only the canny operator takes; sobel "
         "takes one number"),
        ({"operator": "canny", "threshold": 100},
         "canny takes two thresholds, low and high, such as 100,200 (or auto); got 100"),
        ({"operator": "canny", "threshold": "5%"},
         "threshold '5%': a share of edge pixels chooses a Sobel threshold; Canny's share "
         "depends on its hysteresis, so give low,high or auto"),
        ({"operator": "canny", "threshold": (-1, 5)}, "canny thresholds must be >= 0, got (-1, 5)"),
        ({"operator": "canny", "threshold": (1, 2, 3)},
         "canny threshold must be two numbers (low, high) such as (100, 200), or 'auto'; "
         "got (1, 2, 3)"),
        ({"operator": "canny", "threshold": (1, float("inf"))},
         "canny threshold must be two numbers (low, high) such as (100, 200), or 'auto'; "
         "got (1, inf)"),
        ({"operator": "canny", "threshold": (float("nan"), 5)},
         "canny threshold must be two numbers (low, high) such as (100, 200), or 'auto'; "
         "got (nan, 5)"),
        ({"operator": "canny", "threshold": ("50", 5)},
         "canny threshold must be two numbers (low, high) such as (100, 200), or 'auto'; "
         "got ('50', 5)"),
        ({"operator": "canny", "threshold": (True, 5)},
         "canny threshold must be two numbers (low, high) such as (100, 200), or 'auto'; "
         "got (True, 5)"),
        ({"operator": "canny", "border": "reflect101"},
         "border 'reflect101' does not apply to canny: its Sobel always uses the replicate "
         "border, as cv2.Canny's"),
    ],
)  # fmt: skip
def test_bad_canny_options_are_named(fields, message):
    """Each bad combination raises OptionError quoting the value."""
    with pytest.raises(OptionError) as caught:
        Options(**fields)
    assert str(caught.value) == message


def test_any_real_numbers_are_taken():
    """NumPy's numbers are taken as Python's (as cv2.Canny takes them); an integer too large
    for a double is exact, and past every magnitude."""
    options = Options(operator="canny", threshold=(np.float64(10.5), np.int64(30)), norm="l2")
    assert options.threshold == (10.5, 30) and type(options.threshold[1]) is int
    assert options.canny_limits == (110, 900)
    huge = Options(operator="canny", threshold=(10**400, 5))
    assert huge.canny_limits == (5, INT32_MAX)
    assert Options(operator="canny", threshold=(10**400, 5), norm="l2").canny_limits == (
        25, 32767**2,
    )  # fmt: skip


def test_rule_has_no_canny_limits():
    """``auto`` is chosen from a run's frames: asking for its limits before is an error."""
    with pytest.raises(OptionError, match="chosen from a run's frames"):
        Options(operator="canny", threshold="auto").canny_limits  # noqa: B018


def test_edge_params_tell_canny_from_sobel():
    """A Canny run's params name the operator and its pair; a Sobel run's are as before."""
    assert Options().edge_params() == {"threshold": 100, "norm": "l1", "border": "replicate"}
    assert Options(operator="canny", threshold=(5, 9.5), norm="l2").edge_params() == {
        "operator": "canny", "threshold": [5, 9.5], "norm": "l2", "border": "replicate",
    }  # fmt: skip
