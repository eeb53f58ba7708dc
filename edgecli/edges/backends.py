"""Choosing a backend. Both expose ``detect(frames_bgr) -> edges`` over (N, H, W, 3) uint8.

The CUDA backend lives in :mod:`edgecli.edges.cuda_backend`, which imports CuPy; it is imported
here only when asked for, so ``import edgecli``, ``--help`` and the CPU path work without CUDA.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import numpy as np

from ..cuda import driver
from ..errors import CudaUnavailableError
from ..options.params import Options, cpu_if_small
from . import cpu
from .canny import cv2_canny_is_exact
from .variants import Variant


class CpuBackend:
    """The contract on the host, in the cheapest exact OpenCV and NumPy ops
    (:mod:`edgecli.edges.cpu`; :mod:`edgecli.edges.reference` is the spec it matches)."""

    name = "cpu"
    device_name = "cpu"
    runs_on_host = True  # the pipeline calls detect() on every worker thread, frame by frame

    def __init__(self, options: Options):
        self.options = options
        if options.operator == "canny":
            # Decided here, before a run's threads start: the check sets OpenCV's thread count.
            cv2_canny_is_exact()

    def detect(self, frames_bgr: np.ndarray) -> np.ndarray:
        return cpu.detect_batch(frames_bgr, self.options)


# The reason CUDA is unusable on a machine without an NVIDIA GPU: there, the CPU is what the
# user expects, so 'auto' says so only when asked (-v, edgecli info), and no install hint.
NO_GPU = "no NVIDIA GPU"


class Detail(str):
    """A notice worth printing only when asked for (``run -v``): what is expected anyway."""


def cuda_unusable_reason(device: int = 0, options: Options | None = None) -> str | None:
    """None when the CUDA backend can run on ``device``, else a one-line reason (starting
    with NO_GPU where the machine has none). With ``options``, the check compiles the kernel
    variant those options use (and only that one), and the Canny kernels for --operator canny."""
    absent = driver.absence_reason()
    if absent is not None:
        return f"{NO_GPU} ({absent})"
    try:
        import cupy  # noqa: F401 -- optional: absent without the cuda12/cuda13 extras
    except ImportError as exc:  # CuPy, or a library it loads, is missing
        return f"CuPy is not importable ({exc}); install edgecli[cuda12] or edgecli[cuda13]"
    from . import kernels  # imports CuPy, now known to be there

    if options is None:
        return kernels.unusable_reason(device)
    canny_norm = options.norm if options.operator == "canny" else None
    return kernels.unusable_reason(device, Variant(options.norm, options.border), canny_norm)


@dataclass(frozen=True)
class BackendChoice:
    backend: object
    notice: str | None  # set when 'auto' fell back to the CPU, and why (a Detail: no GPU)


def cuda_installed() -> bool:
    """Whether this machine has an NVIDIA GPU and CuPy is installed, as far as is known without
    importing CuPy or starting CUDA (where not, 'auto' says why CUDA is not used, as always)."""
    if driver.absence_reason() is not None:
        return False
    try:
        return importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):  # a broken or blocked install
        return False


# Why 'auto' took the CPU for a run too small to be worth CUDA's start.
SMALL_RUN = "using the CPU backend: the run is over before CUDA would have started (--backend cuda)"


def select_backend(options: Options, small: bool = False) -> BackendChoice:
    """The backend ``options.backend`` names; 'auto' falls back to the CPU with a notice, and
    takes it for a ``small`` run (whose frames the CPU backend is done with before CUDA would
    have started: the outputs are the same) unless ``--decode gpu`` wants the GPU."""
    if options.backend == "cpu":
        return BackendChoice(CpuBackend(options), None)
    if small and cpu_if_small(options.backend, options.decode) and cuda_installed():
        return BackendChoice(CpuBackend(options), Detail(SMALL_RUN))
    reason = cuda_unusable_reason(options.device, options)
    if reason is None:
        from .cuda_backend import CudaBackend  # imports CuPy: only a CUDA run pays for it

        return BackendChoice(CudaBackend(options), None)
    if options.backend == "cuda":
        raise CudaUnavailableError(f"CUDA backend unusable: {reason}")
    if reason.startswith(NO_GPU):
        return BackendChoice(CpuBackend(options), Detail(f"{NO_GPU}: using the CPU"))
    return BackendChoice(CpuBackend(options), f"using the CPU backend; CUDA unusable: {reason}")
