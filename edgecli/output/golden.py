"""Golden outputs for CI: a manifest of a run's edge maps, and a check of a folder against it.

``edgecli run … --write-expected golden.json`` writes the manifest of a run (a report path:
:class:`edgecli.output.sinks.ReportFile`);
``edgecli run … --expect golden.json`` compares the run's output folder against it and fails
with exit code 5, listing the frames that differ, are missing or are extra, and whether the
options differ. The manifest is JSON::

    {
     "edgecli_manifest": 1,             # MANIFEST_FORMAT
     "edgecli_version": "0.1.0",
     "params": {"threshold": 100, "norm": "l1", ...},   # the summary's, less png_bits
     "decoders": {"cpu": 24},            # frames per decoder, as the summary has them
     "frames": {"f000.png": "<32 hex digits>", "sub/f001.png": "...", ...}
    }

``frames`` maps each output PNG, by its POSIX path relative to the output folder, to a digest
of its decoded pixels: the array OpenCV reads from the file unchanged (uint8, 0 or 255 per
pixel, one channel), with its shape. Pixels and not file bytes, because the bytes depend on
the PNG encoder (its version, its compression) and on ``--png-bits``, while the edge contract
fixes the pixels from the options alone: a 1-bit and an 8-bit PNG of one edge map match.

Neither ``edgecli_version`` nor ``decoders`` is compared: a golden must survive an upgrade of
edgecli and the choice of decoder (CPU or the GPU's engines), which change no pixel. They are
recorded to tell where a manifest came from.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np

from ..errors import ExpectationError, InputError
from .sinks import TEMP_PREFIX, write_report

MANIFEST_FORMAT = 1
_KEYS = ("edgecli_manifest", "edgecli_version", "params", "decoders", "frames")

# What edgecli keeps for itself in an output folder: its run record (.edgecli-run.json) and
# the temporaries of edgecli.output.sinks (.edgecli-<pid>-<n>@<host>.tmp) start with a dot;
# TEMP_PREFIX is named too should it ever stop doing so.
_OWN_PREFIXES = (".", TEMP_PREFIX)


def output_names(out_dir: Path) -> list[str]:
    """The output PNGs under ``out_dir``, subfolders included (a --recursive run makes them),
    as sorted POSIX paths relative to it; not the files edgecli keeps for itself."""
    return sorted(
        path.relative_to(out_dir).as_posix()
        for path in Path(out_dir).rglob("*.png")
        if not path.name.startswith(_OWN_PREFIXES) and path.is_file()
    )


def pixel_digest(path: Path) -> str:
    """The digest of a PNG's decoded pixels and shape (InputError if it does not decode)."""

    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise InputError(f"{path}: not a readable PNG")
    height, width = image.shape[:2]
    channels = 1 if image.ndim == 2 else image.shape[2]
    # The shape goes in first: the same bytes as another shape are another image.
    digest = hashlib.blake2b(f"{height}x{width}x{channels}:".encode(), digest_size=16)
    digest.update(np.ascontiguousarray(image).tobytes())
    return digest.hexdigest()


# Run parameters that change an output's bytes but not its pixels: not part of a manifest, so a
# golden made with 1-bit PNGs checks a run that writes 8-bit ones.
BYTES_ONLY_PARAMS = ("png_bits",)


def pixel_params(params: dict) -> dict:
    """The run summary's ``params`` that decide the outputs' pixels."""
    return {key: value for key, value in params.items() if key not in BYTES_ONLY_PARAMS}


def build_manifest(out_dir: Path, params: dict, decoders: dict, version: str) -> dict:
    """The manifest of the outputs now in ``out_dir``, made with ``params`` (the run
    summary's, less those that do not change pixels) by ``decoders`` and edgecli ``version``."""
    return {
        "edgecli_manifest": MANIFEST_FORMAT,
        "edgecli_version": version,
        "params": pixel_params(params),
        "decoders": decoders,
        "frames": {name: pixel_digest(Path(out_dir) / name) for name in output_names(out_dir)},
    }


def manifest_bytes(manifest: dict) -> bytes:
    """``manifest`` as the JSON a manifest file holds."""
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")


def write_manifest(path: Path, manifest: dict) -> None:
    """Write ``manifest`` as JSON, whole or not at all, by the rules of a report path
    (:class:`edgecli.output.sinks.ReportFile`; OutputError if it cannot be)."""
    write_report(path, "manifest", manifest_bytes(manifest))


def read_manifest(path: Path) -> dict:
    """The manifest in ``path``; InputError naming the file and why it is not one."""
    try:
        manifest = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read manifest ({exc.strerror or exc})") from None
    except ValueError:  # not UTF-8, or not JSON
        raise InputError(f"{path}: not a manifest (not JSON)") from None
    reason = _not_a_manifest(manifest)
    if reason:
        raise InputError(f"{path}: not a manifest ({reason})")
    return manifest


def _not_a_manifest(manifest) -> str | None:
    """Why ``manifest`` (parsed JSON) is not a manifest of this format, or None if it is."""
    if not isinstance(manifest, dict):
        return "not a JSON object"
    missing = [key for key in _KEYS if key not in manifest]
    if missing:
        return "no " + ", ".join(missing)
    found = manifest["edgecli_manifest"]
    # bool is an int in Python, and true == 1: refuse it by type.
    if type(found) is not int or found != MANIFEST_FORMAT:
        return f"format {json.dumps(found)}, this edgecli reads format {MANIFEST_FORMAT}"
    if not isinstance(manifest["params"], dict):
        return "params is not an object"
    frames = manifest["frames"]
    if not isinstance(frames, dict) or not all(isinstance(v, str) for v in frames.values()):
        return "frames is not an object of names to digests"
    return None


def compare(manifest: dict, out_dir: Path, params: dict) -> list[str]:
    """What differs between ``out_dir``, made with ``params``, and ``manifest``: one
    ``options differ: …`` line first if the params differ, then ``differs: NAME``,
    ``missing: NAME`` (in the manifest, not in the folder) and ``extra: NAME`` (in the folder,
    not in the manifest), sorted by name. Empty if the folder matches.

    The frames are compared even when the options differ: the list says what the change did.
    """
    problems = []
    options = _options_differ(pixel_params(manifest["params"]), pixel_params(params))
    if options:
        problems.append(f"options differ: {options}")
    expected = manifest["frames"]
    found = output_names(out_dir)
    for name in sorted(set(expected) | set(found)):
        if name not in found:
            problems.append(f"missing: {name}")
        elif name not in expected:
            problems.append(f"extra: {name}")
        elif _digest_or_none(Path(out_dir) / name) != expected[name]:
            problems.append(f"differs: {name}")
    return problems


def _digest_or_none(path: Path) -> str | None:
    # An output that no longer decodes (truncated, say) differs from every digest; it is
    # listed with the others rather than ending the check.
    try:
        return pixel_digest(path)
    except InputError:
        return None


def _options_differ(expected: dict, params: dict) -> str:
    """``key value (expected value)`` for each key whose value differs, sorted by key; a key
    on one side only shows ``missing`` on the other. Empty if none differs."""
    # The manifest's params went through JSON; so do these, or a tuple would differ from the
    # list it was written as.
    params = json.loads(json.dumps(params))
    missing = object()
    differ = []
    for key in sorted(set(expected) | set(params)):
        want, got = expected.get(key, missing), params.get(key, missing)
        if want != got:
            differ.append(f"{key} {_show(got, missing)} (expected {_show(want, missing)})")
    return ", ".join(differ)


def _show(value, missing) -> str:
    if value is missing:
        return "missing"
    return value if isinstance(value, str) else json.dumps(value)


def check(path: Path, out_dir: Path, params: dict) -> None:
    """Compare ``out_dir``, made with ``params``, with the manifest in ``path``.

    Raises ExpectationError (exit 5) with a one-line message and the whole list of
    :func:`compare` as its ``problems``, for the CLI to print line by line; InputError if
    ``path`` is not a manifest.
    """
    manifest = read_manifest(path)
    problems = compare(manifest, out_dir, params)
    if not problems:
        return
    frames = [line for line in problems if not line.startswith("options differ: ")]
    total = len(set(manifest["frames"]) | set(output_names(out_dir)))
    counted = f"{len(frames)} of {total} outputs differ"
    if len(frames) == len(problems):
        message = f"{path}: {counted} from the manifest"
    else:
        options = problems[0].removeprefix("options differ: ")
        message = f"{path}: the options differ from the manifest's ({options})"
        if frames:
            message += f", and {counted}"
    error = ExpectationError(message)
    error.problems = problems
    raise error
