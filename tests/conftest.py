"""Shared fixtures."""

from __future__ import annotations

import os

import numpy as np
import pytest

from edgecli import native
from tests import turbojpeg


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


@pytest.fixture(scope="session")
def complaint():
    """tests.turbojpeg.decode_complaint, libjpeg-turbo's own verdict on a JPEG, where
    libturbojpeg and edgecli's C extension are there (the tests hold edgecli's judging of a
    file's scans to it), else a skip saying which is missing (a failure under CI, so a CI run
    cannot pass without it)."""
    missing = []
    if turbojpeg.load() is None:
        missing.append("libturbojpeg not found (Debian: apt-get install libturbojpeg0)")
    if native.c is None:
        missing.append("edgecli._native is not built (reinstall with a C compiler)")
    if missing:
        if os.environ.get("CI"):
            pytest.fail("; ".join(missing))
        pytest.skip("; ".join(missing))
    return turbojpeg.decode_complaint
