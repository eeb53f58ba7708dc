"""``edgecli info``: versions, and whether CUDA and the GPU decoders are usable here."""

from __future__ import annotations

import platform
import sys

import click

from ..options.params import MAX_DEVICE
from ..version import __version__
from .types import WholeNumber

DEPENDENCIES = ("numpy", "opencv-python-headless", "click", "tqdm", "imageio", "pillow")
CUPY_WHEELS = ("cupy-cuda13x", "cupy-cuda12x")


@click.command()
@click.option(
    "--device",
    type=WholeNumber(0, MAX_DEVICE),
    default=0,
    show_default=True,
    help="CUDA device index to check.",
)
def info(device: int) -> None:
    """Print versions, and whether the CUDA backend is usable here (and if not, why)."""
    from importlib.metadata import PackageNotFoundError, version  # slow, and only info needs it

    # The stages (NumPy, OpenCV) load once a command runs, not at every command's start-up.
    from .. import native
    from ..edges.backends import NO_GPU, cuda_unusable_reason

    click.echo(f"edgecli {__version__}")
    click.echo(f"python {platform.python_version()} ({sys.executable})")
    for package in DEPENDENCIES + CUPY_WHEELS:
        try:
            click.echo(f"{package} {version(package)}")
        except PackageNotFoundError:
            if package not in CUPY_WHEELS:
                click.echo(f"{package} not installed")
    click.echo(f"png encoding and writing: {native.description()}")
    click.echo(f"png decoding on the cpu: {native.png_description()}")
    reason = cuda_unusable_reason(device)
    if reason is None:
        # The kernels, through CuPy: only where CUDA is usable.
        from ..cuda import build
        from ..edges import kernels
        from ..edges.variants import Variant

        major, minor = build.compute_capability(device)
        name = build.device_description(device)
        click.echo(f"cuda: usable: {name}, compute capability {major}.{minor}")
        kernel = kernels.load_kernel(device, Variant())
        click.echo(f"kernel: {kernels.kernel_description(kernel)}")
        from ..edges import cuda_deflate  # imports CuPy

        click.echo(f"png compression (--png-bits 1): {cuda_deflate.description(device)}")
        for line in decoder_lines():
            click.echo(line)
    elif reason.startswith(NO_GPU):  # the why after it, in parentheses
        click.echo(f"cuda: {NO_GPU}: using the CPU{reason.removeprefix(NO_GPU)}")
    else:
        click.echo(f"cuda: unusable: {reason}")


def decoder_lines() -> list[str]:
    """What ``edgecli info`` says of the GPU decoders (with a usable CUDA device)."""
    from importlib.metadata import PackageNotFoundError, version  # slow, and only info needs it

    # Loaded once a command runs, not at every command's start-up.
    from .. import native
    from ..decode.engines import jpeg_unusable_reason, video_unusable_reason

    why = jpeg_unusable_reason("hardware") or native.jpeg_walk_missing()
    if why is None:
        from ..decode.nvjpeg import version as nvjpeg_version  # as the engines, above

        jpeg = f"GPU, the JPEG engines (nvJPEG {nvjpeg_version()})"
    else:
        jpeg = f"CPU ({why})"
    why = video_unusable_reason()
    if why is None:
        try:
            video = f"GPU, NVDEC (PyNvVideoCodec {version('pynvvideocodec')})"
        except PackageNotFoundError:
            video = "GPU, NVDEC (PyNvVideoCodec)"
    else:
        video = f"CPU ({why})"
    # edgecli's own kernels (inflate.cu, png.cu): wherever the edge kernel runs, they run.
    png = "CPU; GPU under --decode gpu (edgecli's inflate and unfilter kernels)"
    return [
        f"jpeg decoding (--decode auto): {jpeg}",
        f"video decoding (--decode auto): {video}",
        f"png decoding (--decode auto): {png}",
    ]
