"""No output overwrites an input: what a run would write, checked against every file it was
given, before any work (links followed, as the kernel follows them)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import OptionError
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
    edgecli's (it holds a run's record: :mod:`edgecli.resume`). The run writes each
    image's PNG, every frame name a video or multi-frame file may have, and ``reports``
    ({what: path}: the JSON summary, the timings CSV).
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
    for what, report in reports.items():
        found = given.get(Path(report))
        if found is not None:
            refuse(found, f"the {what}", f"another name for the {what}")


MAX_LINK_HOPS = 40  # as the kernel follows at most (ELOOP past that)


class _GivenFiles:
    """Files by the folder they lie in (resolved) and their name (lowercase: where the file
    system ignores case, a.PNG is a.png), so that a path written is matched without resolving
    each one. Paths as strings (Path objects made and hashed took most of a 2400-file
    listing's time: :func:`edgecli.sources.folder_files`), each folder resolved once."""

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
