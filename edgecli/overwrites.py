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
    each one."""

    def __init__(self) -> None:
        self.folders: dict[Path, dict[str, tuple[Path, str]]] = {}
        self._resolved: dict[Path, Path] = {}

    def _folder(self, folder: Path) -> Path:
        if folder not in self._resolved:
            self._resolved[folder] = folder.resolve()
        return self._resolved[folder]

    def add(self, path: Path, note: str = "") -> None:
        entries = [path, self._target(path)] if path.is_symlink() else [path]
        for entry in entries:  # replacing a link's name, or writing where it points
            names = self.folders.setdefault(self._folder(entry.parent), {})
            names.setdefault(entry.name.lower(), (path, note))

    def _target(self, link: Path) -> Path:
        """Where ``link`` points in the end, as ``link.resolve()`` says, but with each folder
        resolved once: a folder of thousands of links into one folder costs a readlink each,
        not a walk of every link's path."""
        path = link
        for _ in range(MAX_LINK_HOPS):
            if not path.is_symlink():
                return self._folder(path.parent) / path.name
            target = Path(os.readlink(path))
            path = target if target.is_absolute() else path.parent / target
        return link.resolve()  # a loop, or a longer chain: as resolve() has it

    def in_folder(self, folder: Path) -> dict[str, tuple[Path, str]]:
        return self.folders.get(self._folder(folder), {})

    def get(self, path: Path) -> tuple[Path, str] | None:
        return self.in_folder(path.parent).get(path.name.lower())
