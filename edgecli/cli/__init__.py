"""The ``edgecli`` command: a thin click layer over :mod:`edgecli.pipeline`.

Library errors become one ``Error: …`` line on stderr and the documented exit code;
click itself reports usage errors (exit 2). Nothing here imports CuPy. The commands:
:mod:`.run`, :mod:`.preview`, :mod:`.info`; what they share, :mod:`.common`.
"""

from __future__ import annotations

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
