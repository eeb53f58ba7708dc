"""edgecli: video frames to binary edge maps, on NVIDIA GPUs or bit-exactly on the CPU.

Library API (the CLI is a thin layer over it)::

    edges = edgecli.detect_edges(frame_bgr, threshold=100, norm="l1", border="replicate")
    edges = edgecli.detect_edges(frame_bgr, operator="canny", threshold=(100, 200))
    summary = edgecli.process("frames/", "edges/", threshold=80)

Nothing here imports CuPy; the CUDA backend is loaded only when it is used.
"""

from __future__ import annotations

from importlib import import_module  # loaded with the interpreter: costs nothing

from .version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without the import of typing at start-up

# The public names, imported when first used (PEP 562): importing the package then costs
# next to nothing, so the command's own code (edgecli.cli) runs, and can take Ctrl-C over,
# before these modules (and through them NumPy and OpenCV) are imported.
_LAZY = {
    "CudaUnavailableError": "errors",
    "EdgecliError": "errors",
    "ExpectationError": "errors",
    "FrameArrayError": "errors",
    "FrameError": "errors",
    "InputError": "errors",
    "OptionError": "errors",
    "OutputError": "errors",
    "ResourceError": "errors",
    "Options": "options.params",
    "keep_freed_memory": "pipeline.allocator",
}

if TYPE_CHECKING:
    from .errors import (
        CudaUnavailableError,
        EdgecliError,
        ExpectationError,
        FrameArrayError,
        FrameError,
        InputError,
        OptionError,
        OutputError,
        ResourceError,
    )
    from .options.params import Options
    from .pipeline.allocator import keep_freed_memory

__all__ = [
    "CudaUnavailableError",
    "EdgecliError",
    "ExpectationError",
    "FrameArrayError",
    "FrameError",
    "InputError",
    "OptionError",
    "Options",
    "OutputError",
    "ResourceError",
    "__version__",
    "detect_edges",
    "keep_freed_memory",
    "process",
]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def detect_edges(
    frame_bgr,
    *,
    threshold=None,
    norm: str = "l1",
    border: str = "replicate",
    backend: str = "auto",
    operator: str = "sobel",
):
    """Binary edge map(s) of 8-bit frame(s), per the edge contract.

    ``frame_bgr`` is one frame as OpenCV holds it, uint8: BGR (H, W, 3), gray (H, W) or BGRA
    (H, W, 4), the last two taken as the contract decodes them (gray replicated, alpha
    dropped); or a batch (N, H, W, 3) or (N, H, W, 4). Anything else raises FrameArrayError
    naming its dtype and shape. Returns uint8 0/255 shaped (H, W) or (N, H, W). ``backend``
    is 'auto' (CUDA when usable, else the CPU), 'cuda' or 'cpu'; all give identical bytes.

    ``operator`` 'sobel' (the default): an edge where the gradient magnitude is above
    ``threshold``, a whole number (default 100). 'canny': the bytes of ``cv2.Canny(gray,
    low, high, L2gradient=norm == "l2")`` on the contract's luma, ``threshold`` the pair
    ``(low, high)`` (numbers >= 0, in either order; default (100, 200)); ``border`` stays
    'replicate', as cv2.Canny's.
    """
    # Imported at the first call, as _LAZY's names are: NumPy and OpenCV come with them.
    from .edges.backends import select_backend
    from .edges.reference import as_bgr_frames
    from .options.params import Options

    options = Options(
        threshold=threshold, norm=norm, border=border, backend=backend, operator=operator
    )
    frames, single = as_bgr_frames(frame_bgr)
    edges = select_backend(options).backend.detect(frames)
    return edges[0] if single else edges


def process(input, output, **options):
    """Run the whole job (decode, detect, write PNGs) and return its
    :class:`~edgecli.output.timing.Summary`.

    ``input`` is a folder, a video, an image, a multi-frame image or a glob, or a list of
    them (read in order); ``output`` is the folder to write into. Keyword options are the
    fields of :class:`Options`; ``shard=(i, n)`` runs only part ``i`` of ``n`` of the
    sources (:mod:`edgecli.options.shards`). (The command line also calls :func:`keep_freed_memory`
    first; a script may too.)
    """
    # Imported at the first call, as _LAZY's names are: NumPy and OpenCV come with them.
    from .options.params import Options
    from .pipeline import run

    return run(input, output, Options(**options))
