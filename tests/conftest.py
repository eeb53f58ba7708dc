"""Shared fixtures."""

from __future__ import annotations

import os

import numpy as np
import pytest


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """The suite's own cache folder (the CPU backend caches its cvtColor verdict there),
    for this process and the edgecli processes it starts, not the user's."""
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = previous


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(scope="session")
def gpu():
    """The edgecli.edges.cuda_backend module, or a skip saying why CUDA is unusable here. CuPy is
    imported only once a device is known to be usable, so collection works without it."""
    from edgecli.edges.backends import cuda_unusable_reason

    reason = cuda_unusable_reason()
    if reason is not None:
        pytest.skip(f"CUDA unusable: {reason}")
    from edgecli.edges import cuda_backend as backend

    return backend


@pytest.fixture(scope="session")
def edge_kernels(gpu):
    """The edgecli.edges.kernels module (the edge kernels compiled and loaded), where CUDA is
    usable."""
    from edgecli.edges import kernels

    return kernels


@pytest.fixture(scope="session")
def cp(gpu):
    import cupy

    return cupy


@pytest.fixture(scope="module")
def stream(cp):
    """A non-blocking CUDA stream, one for each module that asks for it."""
    return cp.cuda.Stream(non_blocking=True)
