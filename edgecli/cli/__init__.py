"""The ``edgecli`` command: a thin click layer over :mod:`edgecli.pipeline`.

Library errors become one ``Error: …`` line on stderr and the documented exit code;
click itself reports usage errors (exit 2). Nothing here imports CuPy. The commands:
:mod:`.run`, :mod:`.preview`, :mod:`.info`; what they share, :mod:`.common`. The program
itself is :func:`console`: :func:`main`, then out of the process at once.
"""

from __future__ import annotations

import os
import signal

INTERRUPTED = "Error: interrupted by SIGINT while starting; nothing written"


def _say_interrupted() -> None:
    try:
        os.write(2, f"{INTERRUPTED}\n".encode())
    except OSError:  # stderr closed: the exit code says it
        pass


def _exit_while_importing(signum, frame) -> None:
    """Ctrl-C while the modules below import: nothing is written yet, so out at once (an
    exception here would end in Python's traceback, raised from the import), with the code
    of a death by SIGINT (130, as edgecli.errors has it: not imported yet)."""
    _say_interrupted()
    os._exit(128 + signum)


def _take_sigint_while_importing():
    """The handler for SIGINT while this module loads (its imports: click, the commands;
    then the group's definition), and the one to put back after; None where SIGINT
    is not Python's own (ignored, as in a cluster's worker, or another program's) or this is
    not the main thread."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return None
    try:
        return signal.signal(signal.SIGINT, _exit_while_importing)
    except ValueError:  # not the main thread, which alone takes signals
        return None


_SIGINT_BEFORE = _take_sigint_while_importing()

import sys  # noqa: E402 -- the imports from here on take SIGINT as above

import click  # noqa: E402

from ..errors import EXIT_SIGINT  # noqa: E402
from ..version import __version__  # noqa: E402
from . import info, preview, run  # noqa: E402


class EdgecliGroup(click.Group):
    """Ctrl-C before a run installs its own handler (while Python imports NumPy and OpenCV,
    say) exits 130 with one ``Error:`` line, as one during the run does; click would print
    ``Aborted!`` and exit 1."""

    def make_context(self, *args, **kwargs) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:
            _say_interrupted()
            raise click.exceptions.Exit(EXIT_SIGINT) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _say_interrupted()
            ctx.exit(EXIT_SIGINT)


@click.group(cls=EdgecliGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="edgecli")
def main() -> None:
    """Turn video frames into binary edge maps (RGB -> gray -> Sobel -> threshold, or Canny).

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
    caches freed one by one, CuPy's memory pools handed back), a visible share of a short GPU
    run, for nothing the user sees. An exception other than SystemExit (a bug) still ends in
    Python's own report, but Ctrl-C at any moment is exit 130 and one line."""
    try:
        main(prog_name="edgecli")
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # outside the command, where click would not turn it into 130
        _say_interrupted()
        code = EXIT_SIGINT
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


# The module's own code has run too (the decorators above call into click): Python's own
# handler again, whose KeyboardInterrupt console and the group turn into exit 130. A SIGINT
# that came as it is put back is handled by it within signal.signal, still while importing.
if _SIGINT_BEFORE is not None:
    try:
        signal.signal(signal.SIGINT, _SIGINT_BEFORE)
    except KeyboardInterrupt:
        _exit_while_importing(signal.SIGINT, None)
