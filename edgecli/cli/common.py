"""What the commands share: library errors as click errors, standard streams kept open, and
the frame-selection options of ``run`` and ``preview``."""

from __future__ import annotations

import os

import click

from ..errors import EdgecliError, printable
from ..options.params import BACKENDS, BORDERS, NORMS, OPERATORS, Options
from .types import WholeNumber


class EdgecliClickError(click.ClickException):
    """A library error, printed as ``Error: <message>`` with the error's exit code."""

    def __init__(self, error: EdgecliError):
        super().__init__(printable(str(error)))
        self.exit_code = error.exit_code


def say(message: str) -> None:
    """``edgecli: <message>`` on stderr, on one line whatever paths it names."""
    click.echo(f"edgecli: {printable(message)}", err=True)


def notifier(*, quiet: bool, verbose: bool):
    """The ``notify`` of a command: information said with :func:`say`, none under ``quiet``,
    and a :class:`edgecli.edges.backends.Detail` (what is expected anyway) only under
    ``verbose``."""
    from ..edges.backends import Detail  # NumPy and OpenCV: not at the CLI's start-up

    def notify(message: str) -> None:
        if not quiet and (verbose or not isinstance(message, Detail)):
            say(message)

    return notify


def keep_standard_streams_open() -> None:
    """Put /dev/null on whichever of file descriptors 0, 1 and 2 is closed (``2>&-``).

    Otherwise the next file opened takes its number: an output PNG as fd 2 would receive
    whatever a decoder or the C library writes to stderr. Python has set ``sys.stderr`` to
    None for a closed fd 2, and click writes nothing to a None stream.
    """
    for fd, mode in ((0, os.O_RDONLY), (1, os.O_WRONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, mode)  # the lowest free number: this one, those below are open


def _bundle(*options):
    """One decorator applying ``options`` in the order given (as stacked decorators would)."""

    def apply(command):
        for option in reversed(options):
            command = option(command)
        return command

    return apply


# The options that decide what an edge is, and where it is computed, as run and preview take them.
edge_options = _bundle(
    click.option(
        "--operator", type=click.Choice(OPERATORS), default=Options.operator, show_default=True,
        help="sobel: an edge where the gradient magnitude is above -t T. canny: cv2.Canny's "
        "thin edges (non-maximum suppression, hysteresis between -t LOW,HIGH).",
    ),
    click.option(
        "--norm", type=click.Choice(NORMS), default=Options.norm, show_default=True,
        help="l1: |Gx|+|Gy|; l2: sqrt(Gx^2+Gy^2), compared exactly as Gx^2+Gy^2 > T^2 (under "
        "canny: cv2.Canny's L2gradient).",
    ),
    click.option(
        "--border", type=click.Choice(BORDERS), default=Options.border, show_default=True,
        help="How the Sobel filter sees past the frame edge: aa|abcd|dd, cb|abcd|cb, 00|abcd|00 "
        "(canny: replicate only, as cv2.Canny).",
    ),
    click.option(
        "--backend", type=click.Choice(BACKENDS), default=Options.backend, show_default=True,
        help="auto: CUDA when usable, else the CPU (saying why on stderr where a GPU is there).",
    ),
)  # fmt: skip

# --recursive, --start, --end, --every and --frames: which frames of the INPUTs, as run and
# preview read.
selection_options = _bundle(
    click.option("--recursive", is_flag=True, help="Include subfolders of a folder INPUT."),
    click.option(
        "--start", metavar="N|TIME", default=None,
        help="Each video and multi-frame file from this frame: an index (90) or a time "
        "(1:30, 1:02:03.5, 90.5s).",
    ),
    click.option(
        "--end", metavar="N|TIME", default=None,
        help="... up to, not including, this frame or time.",
    ),
    click.option(
        "--every", type=WholeNumber(1), default=Options.every, show_default=True,
        help="... every Nth frame from --start (names keep the frame's index).",
    ),
    click.option(
        "--frames", "max_frames", type=WholeNumber(1), default=None,
        help="... at most N frames of each.",
    ),
)  # fmt: skip
