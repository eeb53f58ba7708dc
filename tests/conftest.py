"""Shared fixtures."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def gpu():
    """The edgecli.gpu module, or a skip saying why CUDA is unusable here. CuPy is imported
    only once a device is known to be usable, so collection works without it."""
    from edgecli.backends import cuda_unusable_reason

    reason = cuda_unusable_reason()
    if reason is not None:
        pytest.skip(f"CUDA unusable: {reason}")
    from edgecli import gpu

    return gpu


@pytest.fixture(scope="session")
def cp(gpu):
    import cupy

    return cupy
