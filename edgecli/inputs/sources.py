"""Frames in: turn an INPUT argument into an ordered list of frame sources.

INPUT is a video file, a single image, a multi-frame image (animated GIF/WebP/APNG,
multi-page TIFF), a folder of any of these (:data:`FOLDER_EXTENSIONS`) or a quoted glob.
Every frame comes out as the contract's step 0 defines it: 8-bit BGR, H x W x 3, as
``cv2.imread(path, cv2.IMREAD_COLOR)`` or ``cv2.VideoCapture.read()`` yields it (alpha
dropped, gray replicated, 16-bit scaled to 8); the decoding is :mod:`edgecli.decode.cpu`'s.

Output names are fixed here, before any work starts: an image ``a/b.jpg`` becomes
``a/b.png``; frame 12 of ``clip.mp4`` becomes ``clip_000012.png``.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

from ..decode.cpu import (
    EXACT_COUNT_CONTAINERS,
    animation_frames,
    page_count,
    read_image,
    tiff_directories,
    tiff_frames,
    video_frames,
)
from ..decode.kinds import (
    ANIMATION_EXTENSIONS,
    FOLDER_EXTENSIONS,
    IMAGE_EXTENSIONS,
    VIDEO_EXTENSIONS,
)
from ..decode.mp4 import MP4_CONTAINERS, frame_count
from ..errors import FrameError, InputError, OptionError
from ..options.selection import SELECTION_FLAGS, FrameRange, Selection
from ..output.resume import MANIFEST_NAME

FRAME_INDEX_DIGITS = 6
GLOB_CHARS = re.compile(r"[*?\[]")


def natural_key(text: str) -> list:
    """Sort key that orders 'frame2' before 'frame10'."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


@dataclass(frozen=True)
class Frame:
    """One decoded frame, with the name of the PNG it becomes."""

    out_name: str
    source: str
    pixels: np.ndarray


@dataclass(frozen=True)
class ImageSource:
    """A still image: one frame, decoded whenever a worker gets to it."""

    path: Path
    out_name: str

    multi_frame = False

    def decode(self, max_pixels: int) -> Frame:
        return Frame(self.out_name, str(self.path), read_image(self.path, max_pixels))


@dataclass(frozen=True)
class SequenceSource:
    """A video or multi-frame image: frames decode in order from one reader."""

    path: Path
    out_stem: str  # frame i is written as f"{out_stem}_{i:06d}.png"
    kind: str  # "video", "tiff" or "animation"
    selection: FrameRange | None = (
        None  # the frames a run keeps (edgecli.options.selection); None: all
    )

    multi_frame = True

    def frame_name(self, index: int) -> str:
        return f"{self.out_stem}_{index:0{FRAME_INDEX_DIGITS}d}.png"

    def kept(self, index: int) -> bool:
        """Whether the run keeps frame ``index`` (``--start``, ``--end``, ``--every``...)."""
        return self.selection is None or index in self.selection

    def frames(
        self, max_pixels: int, start: int = 0, stop: int | None = None
    ) -> Iterator[Frame | FrameError]:
        """Its frames ``start`` to ``stop`` (None: the end) that the run keeps, in order. A
        FrameError among them is a frame that cannot be read while the ones after it can (a
        corrupt TIFF page); a FrameError raised ends the source."""
        if self.selection is not None:
            start = max(start, self.selection.start)
            if self.selection.stop is not None:
                stop = self.selection.stop if stop is None else min(stop, self.selection.stop)
        if self.kind == "video":  # frames before start, or not kept, are decoded, not converted
            indexed = video_frames(self.path, max_pixels, start, stop, self.kept)
        else:
            readers = {"tiff": tiff_frames, "animation": animation_frames}
            indexed = enumerate(readers[self.kind](self.path, max_pixels))
        for index, pixels in indexed:
            if stop is not None and index >= stop:
                return
            if index < start or not self.kept(index):
                continue
            if isinstance(pixels, FrameError):
                yield pixels
            else:
                yield Frame(self.frame_name(index), f"{self.path} [frame {index}]", pixels)


def _png_is_animated(head: bytes) -> bool:
    # APNG puts an acTL chunk before the first IDAT.
    pos = 8
    while pos + 8 <= len(head):
        length, chunk = struct.unpack(">I4s", head[pos : pos + 8])
        if chunk == b"acTL":
            return True
        if chunk == b"IDAT":
            return False
        pos += 12 + length
    return False


def _webp_is_animated(head: bytes) -> bool:
    # Extended WebP: a VP8X chunk whose flags byte has the animation bit (0x02).
    return head[12:16] == b"VP8X" and len(head) > 20 and bool(head[20] & 0x02)


def _is_multi_frame(path: Path, suffix: str) -> bool:
    if suffix in (".tif", ".tiff"):
        pages, broken = tiff_directories(path)
        return pages > 1 or (pages == 1 and broken)  # broken: the pages after it are lost
    count = page_count(path)
    return count is None or count > 1  # None: read it frame by frame, to say which fails


# The formats whose files may hold several frames, which their header tells.
MAYBE_ANIMATED = (".png", ".webp", ".tif", ".tiff", ".gif")


def classify(path: Path, out_stem: str):
    """The source for one file, by extension and (for PNG/WebP/TIFF/GIF) its header."""
    suffix = path.suffix.lower()
    if suffix in VIDEO_EXTENSIONS:
        return SequenceSource(path, out_stem, "video")
    if suffix in IMAGE_EXTENSIONS or suffix in ANIMATION_EXTENSIONS:
        if suffix not in MAYBE_ANIMATED:
            return ImageSource(path, out_stem + ".png")  # a JPEG, say: one frame, by its format
        try:
            with open(path, "rb") as handle:
                head = handle.read(4096)
        except OSError:
            head = b""  # unreadable: the decode reports it, naming the file
        animated = (
            (suffix == ".png" and _png_is_animated(head))
            or (suffix == ".webp" and _webp_is_animated(head))
            or (suffix in (".tif", ".tiff", ".gif") and head and _is_multi_frame(path, suffix))
        )
        if not animated:
            return ImageSource(path, out_stem + ".png")
        kind = "tiff" if suffix in (".tif", ".tiff") else "animation"
        return SequenceSource(path, out_stem, kind)
    raise InputError(
        f"{path}: unsupported file type {suffix or '(no extension)'!r}; expected an image "
        f"({', '.join(IMAGE_EXTENSIONS + ANIMATION_EXTENSIONS)}) or a video "
        f"({', '.join(VIDEO_EXTENSIONS)})"
    )


def _is_file(entry: os.DirEntry | Path, notify) -> bool:
    """Whether a folder's entry, or a glob's match, is a file or a link to one. A link that
    loops or leads nowhere is not, and ``notify`` names it: the user put it there for a
    reason, and a run that leaves it out without a word looks like one that read it."""
    try:
        if entry.is_file():
            return True
    except OSError:  # a DirEntry raises for a loop, where Path.is_file says False
        pass
    if entry.is_symlink():
        try:
            os.stat(entry)
        except OSError as exc:
            why = "loops" if exc.errno == errno.ELOOP else "leads nowhere"
            notify(f"{os.fspath(entry)}: skipped, a symbolic link that {why}")
    return False


def folder_files(
    folder: Path,
    recursive: bool,
    exclude: Path | None,
    notify: Callable[[str], None] = lambda message: None,
) -> list[Path]:
    """The files in ``folder`` (and, ``recursive``, in its subfolders; those under ``exclude``
    left out) that a run takes, in natural order of their paths below it: files (or links to
    files) with an extension a file INPUT takes (:data:`FOLDER_EXTENSIONS`) whose names do not
    start with a dot. A recursive scan does not enter dot-folders (``.git``, ``.cache``), nor
    a subfolder holding an edgecli run's record (:func:`holds_outputs`). ``notify`` names what
    is left out that a user may have meant: such a subfolder (its PNGs are edge maps, not
    frames), and each link that loops or leads nowhere."""
    if not recursive:
        # One scandir: a regular file's type comes with its name, no stat a file, and names
        # stay strings for the overwrite check (edgecli.inputs.overwrites), where Path.glob and
        # is_file would stat each file and make a Path of each.
        with os.scandir(folder) as entries:
            names = [
                entry.name
                for entry in entries
                if not entry.name.startswith(".")
                and os.path.splitext(entry.name)[1].lower() in FOLDER_EXTENSIONS
                and _is_file(entry, notify)
            ]
        return [folder / name for name in sorted(names, key=natural_key)]
    output = exclude.resolve() if exclude is not None else None
    files = []
    # Links to folders are not followed (nor were they by Path.glob's "**"): a link to a
    # folder above it would be a walk without end.
    for top, folders, names in os.walk(folder):
        here = Path(top)
        entered = []
        for name in folders:
            if name.startswith("."):
                continue
            if holds_outputs(here / name):
                if (here / name).resolve() != output:
                    notify(f"{here / name}: left out, it holds edgecli's output ({MANIFEST_NAME})")
                continue
            entered.append(name)
        folders[:] = entered
        files += [
            here / name
            for name in names
            if not name.startswith(".")
            and os.path.splitext(name)[1].lower() in FOLDER_EXTENSIONS
            and _is_file(here / name, notify)
        ]
    if output is not None:  # an output folder inside the input: its PNGs are not frames
        files = [p for p in files if not p.resolve().is_relative_to(output)]
    return sorted(files, key=lambda p: natural_key(p.relative_to(folder).as_posix()))


def holds_outputs(folder: Path) -> bool:
    """Whether ``folder`` is an edgecli output folder: it holds a run's record
    (:mod:`edgecli.output.resume`)."""
    return os.path.isfile(folder / MANIFEST_NAME)


def _without_outputs(files: list[Path]) -> list[Path]:
    """``files``, one folder's, less the PNGs an earlier run wrote there from the others: those
    named as another file's output (``a.png`` beside ``a.jpg``, ``clip_000012.png`` beside
    ``clip.mp4`` or an animated ``clip.png``)."""
    stems = {p.stem.lower() for p in files}
    image_stems = {p.stem.lower() for p in files if p.suffix.lower() != ".png"}
    frame_name = re.compile(rf"^(.*)_\d{{{FRAME_INDEX_DIGITS}}}$")

    def is_output(path: Path) -> bool:
        if path.suffix.lower() != ".png":
            return False
        stem = path.stem.lower()
        match = frame_name.match(stem)
        return stem in image_stems or (match is not None and match[1] in stems)

    return [p for p in files if not is_output(p)]


def discover(
    input_arg: str | os.PathLike,
    *,
    recursive: bool = False,
    exclude: Path | None = None,
    notify: Callable[[str], None] = lambda message: None,
) -> list:
    """Every source INPUT names, in order, with output names fixed and collisions refused.

    Files under ``exclude`` (the output folder) are left out of a recursive folder scan; where
    a folder INPUT is itself the output folder of an earlier run, the PNGs that run wrote
    there are left out (:func:`_without_outputs`). ``notify`` hears of what a folder scan
    leaves out (:func:`folder_files`).
    """
    text = os.fspath(input_arg)
    path = Path(text)
    if path.is_dir():
        files = folder_files(path, recursive, exclude if recursive else None, notify)
        if (
            not recursive
            and exclude is not None
            and holds_outputs(path)
            and os.path.realpath(path) == os.path.realpath(exclude)
        ):
            files = _without_outputs(files)
        if not files and recursive and exclude is not None and folder_files(path, True, None):
            raise OptionError(
                f"{path}: every image in this folder lies in the output folder {exclude}, which "
                "a recursive scan leaves out (it holds outputs, not frames); choose an output "
                "folder outside the input"
            )
        if not files:
            where = "or its subfolders " if recursive else ""
            raise InputError(
                f"{path}: no frames in this folder {where}(looked for "
                f"{', '.join(FOLDER_EXTENSIONS)})"
            )
        if recursive:
            sources = [classify(f, f.relative_to(path).with_suffix("").as_posix()) for f in files]
        else:  # the same stems, without a PurePath made and compared a file
            sources = [classify(f, os.path.splitext(f.name)[0]) for f in files]
    elif path.is_file():
        sources = [classify(path, path.stem)]
    elif GLOB_CHARS.search(text):
        matches = sorted(
            (Path(m) for m in glob.glob(text, recursive=True) if _is_file(Path(m), notify)),
            key=lambda p: natural_key(p.as_posix()),
        )
        if not matches:
            raise InputError(f"no files match the pattern {text!r}")
        sources = [classify(m, m.stem) for m in matches]
    elif path.exists():
        raise InputError(f"{path}: not a regular file or folder")
    else:
        raise InputError(f"{path}: no such file or folder")
    check_names(sources)
    return sources


def input_list(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """INPUT as a list of arguments: one path or glob, or several; each must be non-empty."""
    texts = [os.fspath(inputs)] if isinstance(inputs, str | os.PathLike) else list(inputs)
    texts = [os.fspath(text) for text in texts]
    if not texts:
        raise OptionError("no INPUT given: name a folder, a file or a glob")
    if "" in texts:  # Path("") is the current folder: never what an empty argument meant
        raise OptionError("an INPUT is empty (''): name a folder, a file or a glob")
    return texts


def discover_inputs(
    inputs: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    recursive: bool = False,
    exclude: Path | None = None,
    notify: Callable[[str], None] = lambda message: None,
) -> list:
    """Every source of one INPUT or several, in the order given, output names checked across
    all of them (as :func:`discover` does for one); a file that two INPUTs name is refused."""
    texts = input_list(inputs)
    if len(texts) == 1:
        return discover(texts[0], recursive=recursive, exclude=exclude, notify=notify)
    sources: list = []
    given: dict[tuple[int, int], Path] = {}  # (device, inode) of a file -> the path named first
    for text in texts:
        found = discover(text, recursive=recursive, exclude=exclude, notify=notify)
        named_here = {}
        for source in found:
            info = source.path.stat()
            key = (info.st_dev, info.st_ino)
            if key in given:
                raise OptionError(
                    f"{given[key]} and {source.path} are the same file, given twice; give it once"
                )
            named_here.setdefault(key, source.path)  # one INPUT may reach a file twice
        given |= named_here
        sources += found
    check_names(sources)
    return sources


def check_names(sources: list) -> None:
    """Refuse, before any work, two sources that would write the same output name."""
    owners: dict[str, Path] = {}
    stems: dict[str, Path] = {}
    for source in sources:
        if source.multi_frame:
            key = source.out_stem.lower()
            other = stems.get(key)
            if other is not None:
                _collision(other, source.path, f"{source.out_stem}_NNNNNN.png")
            stems[key] = source.path
        else:
            key = source.out_name.lower()  # case-insensitive filesystems collide too
            if key in owners:
                _collision(owners[key], source.path, source.out_name)
            owners[key] = source.path
    frame_name = re.compile(rf"^(.*)_\d{{{FRAME_INDEX_DIGITS}}}\.png$")
    for key, path in owners.items():
        match = frame_name.match(key)
        if match and match.group(1) in stems:
            _collision(stems[match.group(1)], path, key)


def _collision(first: Path, second: Path, name: str) -> None:
    raise OptionError(
        f"output name collision: {first} and {second} would both write {name}; "
        "rename one or process them separately"
    )


def count_frames(sources: list, stop: threading.Event | None = None) -> int | None:
    """Frames to expect, for the progress bar; None when a video cannot say, or once ``stop``
    is set (checked before each file that must be opened)."""
    total = 0
    for source in sources:
        if not source.multi_frame:
            total += 1
            continue
        if stop is not None and stop.is_set():
            return None
        if source.kind == "video":
            frames = _video_frame_count(source.path)
            if frames <= 0:
                return None
        elif source.kind == "tiff":
            pages, broken = tiff_directories(source.path)
            frames = pages + broken  # a broken chain: one failure after the pages it has
        else:
            frames = max(page_count(source.path) or 1, 1)
        total += frames if source.selection is None else source.selection.count(frames)
    return total


def _mp4_frame_count(path: Path) -> int | None:
    """An MP4/QuickTime file's frames as its sample table counts them, which is what cv2
    declares (``CAP_PROP_FRAME_COUNT``); None for other files, or where the table does not
    say (:func:`edgecli.decode.mp4.frame_count`)."""
    return frame_count(path) if path.suffix.lower() in MP4_CONTAINERS else None


def _video_frame_count(path: Path) -> int:
    """The frames a video says it has (0 where it cannot say): an MP4/QuickTime file's from its
    sample table, without decoding; any other's from cv2, which opens a decoder."""
    if (frames := _mp4_frame_count(path)) is not None:
        return frames
    capture = cv2.VideoCapture(str(path))
    frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) if capture.isOpened() else 0
    capture.release()
    return frames


def select_frames(sources: list, selection: Selection | None) -> list:
    """``sources`` with each multi-frame file's frames limited to ``selection``; OptionError
    where the run has no multi-frame file to select from, or a file cannot meet it."""
    if selection is None:
        return sources
    if not any(source.multi_frame for source in sources):
        raise OptionError(
            f"{SELECTION_FLAGS} select frames of videos and multi-frame files; the INPUTs "
            "have none (still images are each one frame)"
        )
    return [
        replace(
            source,
            selection=selection.resolve(
                str(source.path), *_rate_and_count(source, want_rate=selection.timed)
            ),
        )
        if source.multi_frame
        else source
        for source in sources
    ]


def _rate_and_count(source, want_rate: bool) -> tuple[Fraction | None, int | None]:
    """A multi-frame file's frame rate (videos only) and its frame count where the file states
    it exactly (None where it is only an estimate or unknown). Without ``want_rate``, an MP4's
    count comes from its sample table, without opening a decoder (as cv2 would to say the
    same), and its rate is None."""
    if source.kind == "tiff":
        pages, broken = tiff_directories(source.path)
        return None, pages + broken
    if source.kind == "animation":
        return None, page_count(source.path)
    if not want_rate and (frames := _mp4_frame_count(source.path)) is not None:
        return None, frames
    capture = cv2.VideoCapture(str(source.path))
    try:
        if not capture.isOpened():
            return None, None  # the run says why it cannot be read
        fps = capture.get(cv2.CAP_PROP_FPS)
        frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    finally:
        capture.release()
    rate = Fraction(fps).limit_denominator(1_000_000) if fps > 0 else None
    exact = source.path.suffix.lower() in EXACT_COUNT_CONTAINERS and frames > 0
    if exact and source.path.suffix.lower() in MP4_CONTAINERS:  # cv2 declares the samples
        exact = _mp4_frame_count(source.path) == frames
    return rate, frames if exact else None
