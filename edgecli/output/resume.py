"""What ``--skip-existing`` may keep: the options recorded for an output folder, and which of
its PNGs are whole.

Every run records the options that decide its output bytes (threshold, norm, border, PNG
bits) in ``<output>/.edgecli-run.json``, written atomically before its first PNG. Under
``--skip-existing`` a folder whose recorded options differ from the requested ones, whose
record is missing (an older edgecli, another tool) while it holds PNGs, or that holds PNGs of
several option sets, is refused: resuming it would keep outputs a clean run would not make.

edgecli's version is recorded but not compared: the edge contract fixes every output pixel
from the options alone, whatever the version, so an upgrade does not make a folder stale.

A run without ``--skip-existing`` rewrites the record. If the folder may then hold PNGs made
with other options (the record differed, or was missing, and PNGs were there), the record
says so (``mixed``) until a run has rewritten every PNG in the folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import OptionError
from ..options.params import Options
from ..version import __version__
from .png import whole_png_pixels
from .sinks import write_atomic

MANIFEST_NAME = ".edgecli-run.json"
MANIFEST_SCHEMA = 1


def recorded_options(options: Options) -> dict:
    """The options that decide an output's bytes, as the record holds them."""
    return options.edge_params() | {"png_bits": options.png_bits}


def read_manifest(out_dir: Path) -> dict | None:
    """The folder's record, or None where there is none or it cannot be read."""
    try:
        manifest = json.loads((out_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("options"), dict):
        return None
    return manifest


def write_manifest(out_dir: Path, options: Options, *, mixed: bool) -> None:
    record = {
        "schema": MANIFEST_SCHEMA,
        "edgecli": __version__,
        "options": recorded_options(options),
        "mixed": mixed,
    }
    write_atomic(out_dir / MANIFEST_NAME, (json.dumps(record, indent=2) + "\n").encode())


def _describe(params: dict) -> str:
    return " ".join(f"{key}={value}" for key, value in params.items())


def _refuse(out_dir: Path, why: str) -> None:
    raise OptionError(
        f"{out_dir}: --skip-existing would keep outputs {why}; write into another folder, "
        "or run without --skip-existing to recompute every frame"
    )


def holds_pngs(out_dir: Path) -> bool:
    return next(out_dir.rglob("*.png"), None) is not None


def begin(out_dir: Path, options: Options) -> bool:
    """Check the folder's record against ``options`` (OptionError where --skip-existing
    would keep stale outputs), then record ``options``; return whether the folder may hold
    PNGs of other options (then :func:`finish` clears that once the run rewrote them all)."""
    # PNGs first, the record second: shards of one run start at once into one folder, and
    # each writes the record before its first PNG, so a PNG seen here means the record read
    # next is there; read the other way round, a shard could miss the record and then see
    # another shard's first PNG, and take PNGs of its own options for stale ones.
    pngs = holds_pngs(out_dir)
    manifest = read_manifest(out_dir)
    wanted = recorded_options(options)
    if options.skip_existing:
        if manifest is None:
            if pngs:
                _refuse(
                    out_dir,
                    f"made with unknown options (no readable {MANIFEST_NAME}: written by an "
                    "older edgecli or another tool)",
                )
        elif manifest["options"] != wanted:
            _refuse(
                out_dir,
                f"made with other options (recorded: {_describe(manifest['options'])}; "
                f"requested: {_describe(wanted)})",
            )
        elif manifest.get("mixed"):
            _refuse(out_dir, "made with other options (the folder holds PNGs of several runs)")
        mixed = False
    else:
        differs = manifest is None or manifest["options"] != wanted or manifest.get("mixed")
        mixed = bool(differs) and pngs
    write_manifest(out_dir, options, mixed=mixed)
    return mixed


def finish(out_dir: Path, options: Options, written: Iterable[str]) -> None:
    """Clear the record's ``mixed`` once every PNG in the folder is one this run wrote.

    Shards of one run (``--shard``) write into one folder at once: each vouches only for the
    PNGs it wrote, so a shard clears the mark only where the folder holds no PNG but its
    own (the others' PNGs, or stale ones, keep it). Nor does it clear a record that another
    run has rewritten meanwhile with other options.
    """
    written = set(written)
    if all(p.relative_to(out_dir).as_posix() in written for p in out_dir.rglob("*.png")):
        manifest = read_manifest(out_dir)
        if manifest is not None and manifest["options"] == recorded_options(options):
            write_manifest(out_dir, options, mixed=False)


def output_is_whole(path: Path, png_bits: int, expected_pixels: Callable[[], int | None]) -> bool:
    """True when the output at ``path`` may be kept: whole (:func:`whole_png_pixels`), and of
    as many pixels as its source (``expected_pixels()``, called only then; None, unknown,
    means it is recomputed). Width x height, not each: a JPEG's EXIF orientation, which the
    decoder applies, swaps its header's width and height."""
    pixels = whole_png_pixels(path, png_bits)
    return pixels is not None and pixels == expected_pixels()
