"""edgecli's folder in the user's cache, for what is worth keeping across runs: compiled
kernels, and verdicts and tables measured once per OpenCV build (:func:`opencv_build_key`).
No OpenCV until that key is asked for."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import OutputError
from .sinks import write_atomic


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/edgecli``, by default ``~/.cache/edgecli``. Everything in it can be
    deleted at any time: what is missing is measured or compiled again."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "edgecli"


def opencv_build_key() -> str:
    """What decides cvtColor's arithmetic here: OpenCV's version, its build (compiler, SIMD
    baseline and dispatch), and the CPU features it may use now (its dispatcher picks a code
    path per CPU, and OPENCV_CPU_DISABLE turns some off)."""
    import cv2  # the rest of this module, as edgecli.cuda.compiling uses it, needs no OpenCV

    build = hashlib.sha256(cv2.getBuildInformation().encode()).hexdigest()[:16]
    features = "".join("1" if cv2.checkHardwareSupport(i) else "0" for i in range(512))
    cpu = hashlib.sha256(features.encode()).hexdigest()[:16]
    return f"opencv {cv2.__version__} build {build} cpu {cpu}"


def _verdicts(path: Path) -> dict:
    try:
        verdicts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or damaged: measured again
    return verdicts if isinstance(verdicts, dict) else {}


def cached_verdict(path: Path, key: str, check: Callable[[], bool]) -> bool:
    """``key``'s verdict in the JSON file of verdicts at ``path``: the one the file holds,
    else ``check()``'s, added to the file (written atomically, beside what other processes
    added meanwhile; where it cannot be written, the verdict holds for this call only). What
    ``check`` raises is raised, and nothing is cached."""

    verdict = _verdicts(path).get(key)
    if isinstance(verdict, bool):
        return verdict
    verdict = check()
    verdicts = _verdicts(path)
    verdicts[key] = verdict
    try:
        data = (json.dumps(verdicts, indent=2, sort_keys=True) + "\n").encode()
        write_atomic(path, data, make_folder=True)  # the cache is edgecli's folder
    except OutputError:
        pass  # read-only home, say
    return verdict
