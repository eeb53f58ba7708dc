"""The ``edgecli`` command: a thin click layer over :mod:`edgecli.pipeline`.

Library errors become one ``Error: …`` line on stderr and the documented exit code;
click itself reports usage errors (exit 2). Nothing here imports CuPy. The commands:
:mod:`.run`, :mod:`.preview`, :mod:`.info`; what they share, :mod:`.common`. The program
itself is :func:`console`: :func:`main`, then out of the process at once.
"""

from __future__ import annotations

import os
import sys

import click

from .. import __version__
from ..errors import EXIT_SIGINT
from . import info, preview, run


class EdgecliGroup(click.Group):
    """Ctrl-C before a run installs its own handler (while Python imports NumPy and OpenCV,
    say) exits 130 with one ``Error:`` line, as one during the run does; click would print
    ``Aborted!`` and exit 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("Error: interrupted by SIGINT while starting; nothing written", err=True)
            ctx.exit(EXIT_SIGINT)


@click.group(cls=EdgecliGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="edgecli")
def main() -> None:
    """Turn video frames into binary edge maps (RGB -> gray -> Sobel -> threshold).

    Runs on an NVIDIA GPU when one is usable, else on the CPU; both give identical bytes.
    """


main.add_command(run.run)
main.add_command(preview.preview)
main.add_command(info.info)


def console() -> None:
    """The ``edgecli`` program (its script and ``python -m edgecli``): :func:`main`, then out
    of the process at once, with its exit code and its output flushed.

    By the time a command returns, every file it writes is closed and renamed into place and
    its workers are done; what a normal exit adds is the interpreter's teardown (modules and
    caches freed one by one, CuPy's memory pools handed back): 0.16-0.20 s of a GPU run on the
    H200 host (benchmarks/RESULTS.md, "GPU decoding"), for nothing the user sees. An exception
    other than SystemExit (a bug) still ends in Python's own report."""
    try:
        main(prog_name="edgecli")
    except SystemExit as exc:
        code = exc.code
    else:  # pragma: no cover - click's standalone mode always ends in SystemExit
        code = 0
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("text"): the text on stderr, exit 1
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: started with that descriptor closed
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more reaches it
            pass
    os._exit(code)
