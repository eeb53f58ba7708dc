"""``edgecli preview``: a contact sheet for choosing a threshold
(:mod:`edgecli.pipeline.preview`)."""

from __future__ import annotations

import click

from ..errors import EdgecliError
from ..options.params import MAX_SHOWN, MAX_WIDTH, MIN_WIDTH, Options, threshold_text
from .common import (
    EdgecliClickError,
    edge_options,
    keep_standard_streams_open,
    notifier,
    selection_options,
)
from .types import WholeNumber, preview_thresholds


@click.command()
@click.argument("inputs", metavar="INPUT...", nargs=-1, required=True)
@click.option("-o", "--output", required=True, metavar="SHEET.png", help="The sheet to write.")
@click.option(
    "--html",
    metavar="PATH|-",
    default=None,
    help="Also write an HTML page: the sheet, and the share of edge pixels as a table (to "
    "stdout with '-').",
)
@click.option(
    "-t",
    "--thresholds",
    metavar="T,T,...|LOW,HIGH",
    multiple=True,
    help="Thresholds to show, each as run -t takes it: e.g. 60,80,100,140 or auto,5%,100. "
    "Canny: one LOW,HIGH pair (or auto) a -t: -t 50,150 -t 100,200.  [default: the one -t "
    "auto chooses, and 0.5, 0.75 and 1.5 times it (canny: its high, low half of each)]",
)
@click.option(
    "--samples",
    "count",
    type=WholeNumber(1, MAX_SHOWN),
    default=4,
    show_default=True,
    help=f"Frames to show, spread over the selected frames (at most {MAX_SHOWN}).",
)
@click.option(
    "--width",
    type=WholeNumber(MIN_WIDTH, MAX_WIDTH),
    default=1600,
    show_default=True,
    help=f"Sheet width in pixels ({MIN_WIDTH} to {MAX_WIDTH}).",
)
@edge_options
@selection_options
@click.option("-q", "--quiet", is_flag=True, help="Say nothing unless something fails.")
def preview(inputs, output, html, thresholds, count, width, quiet, **fields) -> None:
    """Make a contact sheet for choosing a threshold: a few frames spread over the INPUTs,
    each beside its edge maps at several thresholds, with the share of edge pixels.

    Each edge map is what run writes for that frame and threshold, scaled down with
    nearest-neighbour; frames are decoded on the CPU.
    """
    keep_standard_streams_open()
    from ..pipeline.preview import preview as make_preview  # NumPy, OpenCV: not at start-up

    thresholds = preview_thresholds(thresholds, fields["operator"], click.get_current_context())

    notify = notifier(quiet=quiet, verbose=False)

    try:
        options = Options(**fields)
        shown = make_preview(
            inputs, output, options, thresholds=thresholds, frames=count, width=width,
            html=html, notify=notify,
        )  # fmt: skip
    except EdgecliError as exc:
        raise EdgecliClickError(exc) from None
    what = ("; " if options.operator == "canny" else ", ").join(
        map(threshold_text, shown["thresholds"])
    )
    notify(f"{output}: {len(shown['frames'])} frame(s) at thresholds {what} ({shown['backend']})")
