"""edgecli's folder in the user's cache, for what is worth keeping across runs: compiled
kernels, and verdicts and tables measured once per OpenCV build (:func:`opencv_build_key`).
Standard library only, until that key is asked for."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/edgecli``, by default ``~/.cache/edgecli``. Everything in it can be
    deleted at any time: what is missing is measured or compiled again."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "edgecli"


def opencv_build_key() -> str:
    """What decides cvtColor's arithmetic here: OpenCV's version, its build (compiler, SIMD
    baseline and dispatch), and the CPU features it may use now (its dispatcher picks a code
    path per CPU, and OPENCV_CPU_DISABLE turns some off)."""
    import hashlib

    import cv2

    build = hashlib.sha256(cv2.getBuildInformation().encode()).hexdigest()[:16]
    features = "".join("1" if cv2.checkHardwareSupport(i) else "0" for i in range(512))
    cpu = hashlib.sha256(features.encode()).hexdigest()[:16]
    return f"opencv {cv2.__version__} build {build} cpu {cpu}"
