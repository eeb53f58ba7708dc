"""No output overwrites an input: what a run would write, checked against every file it was
given, before any work (links followed, as the kernel follows them)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..errors import OptionError
from ..output.resume import MANIFEST_NAME
from ..output.sinks import MAX_LINK_HOPS, STDOUT
from .sources import FRAME_INDEX_DIGITS, folder_files


def refuse_overwriting_inputs(
    inputs: list[str],
    sources: list,
    out_dir: Path,
    *,
    recursive: bool,
    reports: dict,
    own_output: bool = False,
) -> None:
    """Refuse, before any work, a run that would write over a file it was given.

    The files given are the sources, and, where a recursive folder INPUT holds the output
    folder, the images in the output folder: the scan leaves them out, and they may be earlier
    outputs, but they may as well be the user's own - unless ``own_output`` says the folder is
    edgecli's (it holds a run's record: :mod:`edgecli.output.resume`). The run writes each
    image's PNG, every frame name a video or multi-frame file may have, and ``reports``
    ({what: path}: the JSON summary, the timings CSV, the manifest), written through a link.
    Nor may a report land on an output.
    """
    given = _GivenFiles()
    for source in sources:
        given.add(source.path)
    if recursive and out_dir.is_dir() and not own_output:
        out_real = out_dir.resolve()
        if any(Path(t).is_dir() and out_real.is_relative_to(Path(t).resolve()) for t in inputs):
            for path in folder_files(out_dir, True, None):
                given.add(path, note=" (in the output folder, which a recursive scan leaves out)")

    def refuse(found: tuple[Path, str], writer: str, instead="another output folder") -> None:
        path, note = found
        raise OptionError(f"{path}: {writer} would overwrite this input{note}; choose {instead}")

    for source in sources:
        if source.multi_frame:
            stem = Path(source.out_stem)
            digits = rf"_\d{{{FRAME_INDEX_DIGITS}}}\.png"
            frame_name = re.compile(re.escape(stem.name.lower()) + digits)
            for name, found in given.in_folder(out_dir / stem.parent).items():
                if frame_name.fullmatch(name):  # conservative: a video's length is not known
                    refuse(found, f"a frame of {source.path}")
        else:
            found = given.get(out_dir / source.out_name)
            if found is not None:
                refuse(found, f"the output of {source.path}")
    for what, report in _files(reports):
        # The name given, and where it leads: a report is written through a link.
        found = given.get(Path(report)) or given.get(Path(os.path.realpath(report)))
        if found is not None:
            refuse(found, f"the {what}", f"another name for the {what}")
    refuse_reports_over_outputs(sources, out_dir, reports)


def refuse_reports_over_outputs(sources: list, out_dir: Path, reports: dict) -> None:
    """Refuse a report (``{what: path}``) that lands on a file the run writes in the output
    folder: a PNG, a frame name, the folder's record. The one written last would be all that
    is left of both."""
    out_real = Path(os.path.realpath(out_dir))
    for what, report in _files(reports):
        target = Path(os.path.realpath(report))
        if not target.is_relative_to(out_real):
            continue
        name = target.relative_to(out_real).as_posix().lower()
        clash = {".": "the output folder", MANIFEST_NAME.lower(): "the output folder's record"}
        clash = clash.get(name)
        for source in sources if clash is None else ():
            if source.multi_frame:
                stem = re.escape(Path(source.out_stem).as_posix().lower())
                if re.fullmatch(rf"{stem}_\d{{{FRAME_INDEX_DIGITS}}}\.png", name):
                    clash = f"a frame of {source.path}"
            elif Path(source.out_name).as_posix().lower() == name:
                clash = f"the output of {source.path}"
            if clash is not None:
                break
        if clash is not None:
            raise OptionError(
                f"{report}: the {what} would overwrite {clash}; choose another name for the {what}"
            )


def _files(reports: dict):
    """The reports (``{what: path}``) that name files: standard output (``-``) is none."""
    return ((what, path) for what, path in reports.items() if os.fspath(path) != STDOUT)


def refuse_special_outputs(sources: list, out_dir: Path) -> None:
    """Refuse, before any work, a run whose output name (a PNG's, the folder's record), or
    an output subfolder, holds something other than a regular file or folder: a symbolic
    link, a device, a FIFO. The rename that writes a PNG would replace it, a link the user
    made included; edgecli replaces only its own kind of file in the output folder. One
    listing of each output folder, not a look at each output name."""
    specials: dict[Path, dict[str, tuple[str, str]]] = {}

    def special_entries(folder: Path) -> dict[str, tuple[str, str]]:
        if folder not in specials:
            specials[folder] = _special_entries(folder, out_dir)
        return specials[folder]

    record = special_entries(out_dir).get(MANIFEST_NAME.lower())
    if record is not None:
        _refuse_special(out_dir, *record)
    for source in sources:
        if source.multi_frame:
            stem = out_dir / source.out_stem
            digits = rf"_\d{{{FRAME_INDEX_DIGITS}}}\.png"
            frame_name = re.compile(re.escape(stem.name.lower()) + digits)
            folder, entries = stem.parent, special_entries(stem.parent)
            found = next((entries[n] for n in entries if frame_name.fullmatch(n)), None)
        else:
            out = out_dir / source.out_name
            folder, found = out.parent, special_entries(out.parent).get(out.name.lower())
        if found is not None:
            _refuse_special(folder, *found)


def _refuse_special(folder: Path, name: str, kind: str) -> None:
    raise OptionError(
        f"{folder / name}: {kind} lies at an output name, and edgecli replaces only regular "
        "files in the output folder; remove it or choose another output folder"
    )


def _special_entries(folder: Path, out_dir: Path) -> dict[str, tuple[str, str]]:
    """The entries of ``folder`` (in ``out_dir``) that are neither regular files nor
    folders, by lowercase name, each as its name and what it is; OptionError if ``folder``,
    or a folder between it and ``out_dir``, is a link (PNGs would be written where it
    leads)."""
    for above in (folder, *folder.parents):
        if above == out_dir or not above.is_relative_to(out_dir):
            break
        if os.path.islink(above):
            raise OptionError(
                f"{above}: an output subfolder is a symbolic link, and edgecli writes only "
                "into the output folder; remove it or choose another output folder"
            )
    found = {}
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_symlink():
                    found[entry.name.lower()] = (entry.name, "a symbolic link")
                elif not entry.is_file(follow_symlinks=False) and not entry.is_dir(
                    follow_symlinks=False
                ):
                    kind = _kind(entry.stat(follow_symlinks=False).st_mode)
                    found[entry.name.lower()] = (entry.name, kind)
    except (FileNotFoundError, NotADirectoryError):
        pass  # made by the run: nothing there yet
    return found


def _kind(mode: int) -> str:
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a FIFO" if stat.S_ISFIFO(mode) else "a socket"


class _GivenFiles:
    """Files by the folder they lie in (resolved) and their name (lowercase: where the file
    system ignores case, a.PNG is a.png), so that a path written is matched without resolving
    each one. Paths as strings (making and hashing a Path object a file would cost more than
    listing the folder: :func:`edgecli.inputs.sources.folder_files`), each folder resolved
    once."""

    def __init__(self) -> None:
        self.folders: dict[str, dict[str, tuple[Path, str]]] = {}
        self._resolved: dict[str, str] = {}

    def _folder(self, folder: str) -> str:
        found = self._resolved.get(folder)
        if found is None:
            found = self._resolved[folder] = os.path.realpath(folder or ".")
        return found

    def add(self, path: Path, note: str = "") -> None:
        text = os.fspath(path)
        entries = [text, self._target(text)] if os.path.islink(text) else [text]
        for entry in entries:  # replacing a link's name, or writing where it points
            folder, name = os.path.split(entry)
            names = self.folders.setdefault(self._folder(folder), {})
            names.setdefault(name.lower(), (path, note))

    def _target(self, link: str) -> str:
        """Where ``link`` points in the end, as ``os.path.realpath`` says, but with each folder
        resolved once: a folder of thousands of links into one folder costs a readlink each,
        not a walk of every link's path."""
        path = link
        for _ in range(MAX_LINK_HOPS):
            if not os.path.islink(path):
                folder, name = os.path.split(path)
                return os.path.join(self._folder(folder), name)
            target = os.readlink(path).rstrip("/") or "/"
            path = target if os.path.isabs(target) else os.path.join(os.path.dirname(path), target)
        return os.path.realpath(link)  # a loop, or a longer chain: as realpath has it

    def in_folder(self, folder: Path) -> dict[str, tuple[Path, str]]:
        return self.folders.get(self._folder(os.fspath(folder)), {})

    def get(self, path: Path) -> tuple[Path, str] | None:
        folder, name = os.path.split(os.fspath(path))
        return self.folders.get(self._folder(folder), {}).get(name.lower())
