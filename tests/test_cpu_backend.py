"""The CPU backend's cvtColor luma: used only where verified, the verdict cached per build."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

import edgecli
from edgecli.edges import cpu

from .media import photo
from .oracle import plain_edges

REAL_CVTCOLOR = cv2.cvtColor


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache folder, and no verdict remembered by this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cpu.cvtcolor_luma_is_exact.cache_clear()
    yield tmp_path / "cache" / "edgecli"
    cpu.cvtcolor_luma_is_exact.cache_clear()


def off_by_one_when_alone(image, code):
    """cvtColor, but one pixel rows of colour (B, G, R) = (1, 2, 3) come out 1 too bright:
    a defect of the scalar code only."""
    gray = REAL_CVTCOLOR(image, code)
    if image.shape[1] == 1:
        gray[(image[:, 0] == (1, 2, 3)).all(axis=-1)] += 1
    return gray


def test_verdict_is_cached_per_opencv_build(fresh_cache):
    """The first CPU run checks cvtColor and caches its verdict under this OpenCV's version
    and build, keeping other builds' verdicts, with no temporary left beside it."""
    fresh_cache.mkdir(parents=True)
    (fresh_cache / cpu.CACHE_FILE).write_text('{"opencv 4.0.0 build x cpu y": false}')
    frame = photo(31, 47)
    edges = edgecli.detect_edges(frame, backend="cpu")
    np.testing.assert_array_equal(edges, plain_edges(frame, 100, "l1", "replicate"))
    verdicts = json.loads((fresh_cache / cpu.CACHE_FILE).read_text())
    assert verdicts.keys() == {"opencv 4.0.0 build x cpu y", cpu.opencv_build_key()}
    assert verdicts["opencv 4.0.0 build x cpu y"] is False
    assert verdicts[cpu.opencv_build_key()] is cpu.cvtcolor_luma_is_exact()
    assert cv2.__version__ in cpu.opencv_build_key()
    assert sorted(p.name for p in fresh_cache.iterdir()) == [cpu.CACHE_FILE]


def test_cvtcolor_that_differs_is_not_used(fresh_cache, monkeypatch):
    """Where cvtColor differs from the contract on one colour in one code path, the check
    says so, the verdict cached is False, and the edges still equal the oracle's."""
    monkeypatch.setattr(cv2, "cvtColor", off_by_one_when_alone)
    assert cpu.check_cvtcolor_luma() is False
    frame = np.zeros((9, 1, 3), np.uint8)
    frame[4] = (1, 2, 3)  # luma 2 (3 with the defect): |Gy| beside it 8 (12); -t 8 tells
    for threshold in (4, 7, 8):
        edges = edgecli.detect_edges(frame, backend="cpu", threshold=threshold)
        np.testing.assert_array_equal(edges, plain_edges(frame, threshold, "l1", "replicate"))
    verdicts = json.loads((fresh_cache / cpu.CACHE_FILE).read_text())
    assert verdicts == {cpu.opencv_build_key(): False}


def test_cached_false_verdict_is_honoured(fresh_cache, monkeypatch):
    """A cached 'not exact' verdict keeps cvtColor out of the luma, without a re-check."""
    fresh_cache.mkdir(parents=True)
    (fresh_cache / cpu.CACHE_FILE).write_text(json.dumps({cpu.opencv_build_key(): False}))
    monkeypatch.setattr(cv2, "cvtColor", lambda image, code: np.zeros(image.shape[:2], np.uint8))
    frame = photo(20, 30)
    edges = edgecli.detect_edges(frame, backend="cpu", threshold=50)
    np.testing.assert_array_equal(edges, plain_edges(frame, 50, "l1", "replicate"))


def test_unwritable_cache_still_gives_exact_edges(fresh_cache):
    """A cache folder that cannot be made (its parent is a file): no error, exact edges."""
    fresh_cache.parent.write_text("a file where the cache folder would be")
    frame = photo(25, 40)
    edges = edgecli.detect_edges(frame, backend="cpu", norm="l2", threshold=90)
    np.testing.assert_array_equal(edges, plain_edges(frame, 90, "l2", "replicate"))
    assert fresh_cache.parent.is_file()
