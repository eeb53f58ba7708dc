"""``edgecli preview``: a contact sheet for choosing a threshold by looking.

A few frames spread over the input (:func:`edgecli.inputs.sampling.sample_frames`, the frames a
``run`` with the same selection options would process), each shown as the source frame and
its edge maps at several thresholds, computed by the backend ``run`` uses (so each tile is a
``run`` output, scaled with nearest-neighbour: :mod:`edgecli.output.sheet`), with the threshold and
the share of edge pixels under each tile. By default the thresholds spread around the one
``-t auto`` chooses for the same input.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from html import escape
from pathlib import Path

import cv2
import numpy as np

from ..edges.backends import select_backend
from ..errors import InputError, OptionError
from ..inputs.sampling import sample_frame_sets
from ..inputs.sources import discover_inputs, select_frames
from ..options.params import (
    MAX_SHEET_PIXELS,
    MAX_SHOWN,
    MAX_THRESHOLDS,
    MAX_WIDTH,
    MIN_WIDTH,
    Options,
    check_path,
    parse_rule,
    threshold_text,
)
from ..output.sheet import (
    CAPTION_H,
    DEFAULT_WIDTH,
    LABEL_H,
    MARGIN,
    ROW_GAP,
    Row,
    Tile,
    render,
    tile_width,
)
from ..output.sinks import discard_reports, open_reports, write_reports
from .threshold import AUTO_SAMPLE, canny_pair, resolve

PREVIEW_FRAMES = 4
# The default thresholds: the automatic one times these (rounded, each once).
SPREAD = (0.5, 0.75, 1.0, 1.5)


def chosen_thresholds(
    thresholds: list | None, sample: list, options: Options, notify
) -> tuple[list, dict]:
    """The numbers to show, ascending, and the rule that chose each one chosen by a rule
    (``auto``, ``5%``): ``thresholds`` as given, each rule replaced by the number it picks from
    ``sample`` as ``run -t`` would; by default a spread around the one ``-t auto`` picks."""
    rules: dict = {}  # number (Canny: pair) -> the rule that chose it
    for rule in ["auto"] if thresholds is None else thresholds:
        if parse_rule(rule) is not None:
            chosen = resolve(replace(options, threshold=rule), [], notify, sample).threshold
            rules[chosen] = f"{rules[chosen]}, {rule}" if chosen in rules else rule
    if thresholds is None:
        (auto,) = rules
        if options.operator == "canny":  # the spread of high, low half of each
            highs = {max(0, round(auto[1] * factor)) for factor in SPREAD}
            return sorted(map(canny_pair, highs)), rules
        return sorted({max(0, round(auto * factor)) for factor in SPREAD}), rules
    numbers = {t for t in thresholds if parse_rule(t) is None} | set(rules)
    return sorted(numbers), rules


def preview(
    inputs, sheet: str | Path, options: Options, *, thresholds: list | None = None,
    frames: int = PREVIEW_FRAMES, width: int = DEFAULT_WIDTH, html: str | Path | None = None,
    notify=None,
) -> dict:  # fmt: skip
    """Write the contact sheet of ``inputs`` to ``sheet`` (a .png path) and, with ``html``, a
    page showing it with the shares of edge pixels as a table, both report paths
    (:class:`edgecli.output.sinks.ReportFile`: opened before any frame is decoded, written whole at
    the end, into a device or FIFO, through a link); ``thresholds``: numbers and rules
    (``"auto"``, ``"5%"``) as ``run -t`` takes them (Canny: pairs, and ``"auto"``), each rule
    replaced by the number (pair) it picks.
    Return what they show: ``{"frames": [source, ...], "outputs": [name, ...], "thresholds":
    [...], "auto": T or None, "rules": {T: rule}, "shares": [{T: percent, ...} per frame],
    "backend": ...}``."""
    notify = notify or (lambda message: None)
    sheet = _checked_paths(sheet, html)
    reports = open_reports({"sheet": sheet} | ({"page": Path(html)} if html is not None else {}))
    try:
        shown, png = _sheet(inputs, sheet, html, options, thresholds, frames, width, notify)
    except BaseException:  # a failed preview leaves neither file, not even an empty one
        discard_reports(reports)
        raise
    write_reports(
        reports,
        {"sheet": lambda: png, "page": lambda: page(png, shown, options).encode("utf-8")},
    )
    return shown


def _sheet(inputs, sheet, html, options, thresholds, frames, width, notify) -> tuple[dict, bytes]:
    """What the preview shows, and its sheet as a PNG."""
    found = discover_inputs(inputs, recursive=options.recursive, notify=notify)
    sources = select_frames(found, options.selection)
    written = {sheet.resolve(), _resolved(html)}
    if any(source.path.resolve() in written for source in sources):
        raise OptionError(f"{sheet if html is None else f'{sheet} or {html}'} is an input; write "
                          "the preview elsewhere")  # fmt: skip
    check_sheet(frames, len(SPREAD) if thresholds is None else len(thresholds), width)
    for t in thresholds or []:  # each one the operator takes, before any frame is decoded
        replace(options, threshold=t)
    rules: dict[int, str] = {}
    if thresholds is None or any(parse_rule(t) is not None for t in thresholds):
        # the rules' sample and the frames shown, decoded in one pass
        auto_sample, sample = sample_frame_sets(sources, [AUTO_SAMPLE, frames], options.max_pixels)
        thresholds, rules = chosen_thresholds(thresholds, auto_sample, options, notify)
    else:
        thresholds = sorted(set(thresholds))
        sample = sample_frame_sets(sources, [frames], options.max_pixels)[0]
    if not sample:
        raise InputError("no frame of the input could be decoded for the preview")
    edges_at, backend = _edges(sample, options, thresholds, notify)
    shown = {
        "frames": [frame.source for frame in sample],
        "outputs": [frame.out_name for frame in sample],
        "thresholds": thresholds,
        "auto": next((t for t, rule in rules.items() if "auto" in rule.split(", ")), None),
        "rules": rules,
        "shares": [
            {t: 100 * np.count_nonzero(edges_at[t][k]) / edges_at[t][k].size for t in thresholds}
            for k in range(len(sample))
        ],
        "backend": backend,
    }
    return shown, _sheet_png(sheet, sample, edges_at, shown, width)


def check_sheet(frames: int, thresholds: int, width: int) -> None:
    """OptionError, before any frame is decoded, for a sheet of ``frames`` rows of a source
    and ``thresholds`` edge maps, ``width`` pixels wide, that could not be drawn or would be
    larger than the limits (the tallest sheet: every frame square, as tall as a tile is wide)."""
    if not 1 <= frames <= MAX_SHOWN:
        raise OptionError(f"frames must be from 1 to {MAX_SHOWN}, got {frames}")
    if not 1 <= thresholds <= MAX_THRESHOLDS:
        raise OptionError(f"give from 1 to {MAX_THRESHOLDS} thresholds to show, not {thresholds}")
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        raise OptionError(f"width must be from {MIN_WIDTH} to {MAX_WIDTH} pixels, got {width}")
    try:
        tile_w = tile_width(1 + thresholds, width)
    except ValueError as exc:
        raise OptionError(f"{exc}: give a larger --width or fewer thresholds") from None
    height = 2 * MARGIN + frames * (CAPTION_H + tile_w + LABEL_H) + (frames - 1) * ROW_GAP
    if width * height > MAX_SHEET_PIXELS:
        raise OptionError(
            f"a sheet {width} px wide showing {frames} frame(s) may be {height} px tall, more "
            f"than {MAX_SHEET_PIXELS} pixels in all; give a smaller --width or fewer --frames"
        )


def _checked_paths(sheet, html) -> Path:
    sheet = Path(check_path("sheet path", sheet))
    if sheet.suffix.lower() != ".png":
        raise OptionError(f"{sheet}: the sheet is a PNG; name it something.png")
    if html is not None and _resolved(html) == sheet.resolve():
        raise OptionError(f"{html}: the page and the sheet need names of their own")
    return sheet


def _resolved(path) -> Path | None:
    return None if path is None else Path(check_path("page path", path)).resolve()


def _label(t: int, shown: dict) -> str:
    """``T=57``, or with the rule that chose it: ``T=57 (auto)``, ``T=40 (5%)``."""
    text = threshold_text(t)
    return f"T={text} ({shown['rules'][t]})" if t in shown["rules"] else f"T={text}"


def _sheet_png(sheet: Path, sample: list, edges_at: dict, shown: dict, width: int) -> bytes:
    """The sheet: a row a frame, its source and then its edge map at each threshold."""
    rows = []
    for k, frame in enumerate(sample):
        tiles = [Tile(frame.pixels, "source")]
        for t in shown["thresholds"]:  # under each, the share of edge pixels
            tiles.append(Tile(edges_at[t][k], f"{_label(t, shown)}: {shown['shares'][k][t]:.2f}%"))
        height, width_px = frame.pixels.shape[:2]
        rows.append(Row(f"{frame.source}  ({width_px}x{height})", tiles))
    ok, encoded = cv2.imencode(".png", render(rows, width))
    if not ok:
        raise InputError(f"{sheet}: the sheet could not be encoded")
    return encoded.tobytes()


def page(png: bytes, shown: dict, options: Options) -> str:
    """The HTML page: the sheet (embedded, so the page is one file) over a table of the share
    of edge pixels, frame by threshold."""
    heads = "".join(f"<th>{escape(_label(t, shown))}</th>" for t in shown["thresholds"])
    lines = []
    for source, shares in zip(shown["frames"], shown["shares"], strict=True):
        cells = "".join(f"<td>{shares[t]:.2f}%</td>" for t in shown["thresholds"])
        lines.append(f"<tr><th scope='row'>{escape(source)}</th>{cells}</tr>")
    about = (
        f"--operator {options.operator}, --norm {options.norm}, --border {options.border}, "
        f"backend {shown['backend']}; each "
        "edge map is what edgecli run writes at that threshold, scaled with nearest-neighbour"
    )
    image = base64.b64encode(png).decode("ascii")
    return (
        "<!doctype html>\n<html lang='en'><meta charset='utf-8'><title>edgecli preview</title>\n"
        "<style>body{font-family:sans-serif;margin:1em}td,th{padding:2px 10px;text-align:right}"
        "th[scope=row]{text-align:left;font-weight:normal}img{max-width:100%}</style>\n"
        f"<h1>edgecli preview</h1>\n<p>{escape(about)}.</p>\n"
        f"<img src='data:image/png;base64,{image}' alt='the contact sheet'>\n"
        "<table><caption>Edge pixels, % of each frame</caption>\n"
        f"<tr><th>frame</th>{heads}</tr>\n" + "\n".join(lines) + "\n</table>\n</html>\n"
    )


def _edges(sample: list, options: Options, thresholds: list, notify):
    """The edge maps of ``sample`` at each threshold, by the backend ``run`` would use (one
    frame at a time: the sample's frames may differ in size); and that backend's name."""
    choice = select_backend(replace(options, threshold=thresholds[0]))
    if choice.notice:
        notify(choice.notice)
    name = choice.backend.name
    edges_at = {}
    for t in thresholds:
        at = choice.backend if t == thresholds[0] else None
        at = at or select_backend(replace(options, threshold=t, backend=name)).backend
        edges_at[t] = [at.detect(frame.pixels[np.newaxis])[0] for frame in sample]
    return edges_at, name
