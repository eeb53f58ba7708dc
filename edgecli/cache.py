"""edgecli's folder in the user's cache, for what is worth keeping across runs: compiled
kernels, and verdicts and tables measured once per OpenCV build. Standard library only."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/edgecli``, by default ``~/.cache/edgecli``. Everything in it can be
    deleted at any time: what is missing is measured or compiled again."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "edgecli"
