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


@pytest.fixture(scope="module")
def gpu_decode(gpu):
    """edgecli.decode.gpu.decoders, or a skip naming the GPU decoder that cannot run here."""
    from edgecli.decode import engines

    reason = engines.jpeg_unusable_reason("hardware")
    if reason is not None:
        pytest.skip(f"nvJPEG's hardware decoder unusable: {reason}")
    from edgecli.decode.gpu import decoders

    return decoders


@pytest.fixture(autouse=True)
def engines_from_the_first_file(request, monkeypatch):
    """Every JPEG of these short runs to the engines (auto waits for JPEG_MIN_FILES), and none
    to the CPU while they open: the decoder each file gets is then known."""
    if "gpu_decode" not in request.fixturenames and "nvdec" not in request.fixturenames:
        return
    from edgecli.decode import plan as decoders
    from edgecli.decode.gpu import jpeg as gpu_jpeg

    monkeypatch.setattr(decoders, "JPEG_MIN_FILES", 1)
    monkeypatch.setattr(gpu_jpeg.JpegDecoder, "ready", lambda self: self.opened.result() is None)


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
