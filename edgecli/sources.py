"""Frames in: turn an INPUT argument into an ordered list of frame sources.

INPUT is a folder of images, a video file, a single image, a multi-frame image (animated
GIF/WebP/APNG, multi-page TIFF) or a quoted glob. Every frame comes out as the contract's
step 0 defines it: 8-bit BGR, H x W x 3, as ``cv2.imread(path, cv2.IMREAD_COLOR)`` or
``cv2.VideoCapture.read()`` yields it (alpha dropped, gray replicated, 16-bit scaled to 8).

Output names are fixed here, before any work starts: an image ``a/b.jpg`` becomes
``a/b.png``; frame 12 of ``clip.mp4`` becomes ``clip_000012.png``.
"""

from __future__ import annotations

import glob
import io
import os
import re
import stat
import struct
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from .errors import FrameError, InputError, OptionError
from .png import PNG_SIGNATURE

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
ANIMATION_EXTENSIONS = (".gif",)
VIDEO_EXTENSIONS = (
    ".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".ts", ".mts",
    ".m2ts", ".wmv", ".flv", ".3gp", ".ogv", ".y4m",
)  # fmt: skip
# Containers whose index gives an exact frame count, so a shorter decode means truncation.
EXACT_COUNT_CONTAINERS = (".mp4", ".m4v", ".mov", ".avi")
FRAME_INDEX_DIGITS = 6
GLOB_CHARS = re.compile(r"[*?\[]")


def natural_key(text: str) -> list:
    """Sort key that orders 'frame2' before 'frame10'."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def to_bgr8(pixels: np.ndarray, source: str) -> np.ndarray:
    """An image array from imageio as cv2.imread(IMREAD_COLOR) would give it."""
    if pixels.dtype == np.uint16:
        # libpng's 16-to-8 strip, which cv2.imread uses for PNG: keep the high byte.
        pixels = (pixels >> 8).astype(np.uint8)
    elif pixels.dtype == np.bool_:
        pixels = pixels.astype(np.uint8) * np.uint8(255)
    elif pixels.dtype != np.uint8:
        raise FrameError(source, f"unsupported pixel type {pixels.dtype}")
    if pixels.ndim == 3 and pixels.shape[2] in (1, 2):  # gray, gray + alpha
        pixels = pixels[:, :, 0]
    if pixels.ndim == 2:
        return np.ascontiguousarray(np.repeat(pixels[:, :, np.newaxis], 3, axis=2))
    if pixels.ndim == 3 and pixels.shape[2] in (3, 4):  # RGB, RGBA: drop alpha, to BGR
        return np.ascontiguousarray(pixels[:, :, 2::-1])
    raise FrameError(source, f"unsupported image shape {pixels.shape}")


# JPEG's start-of-frame markers, which hold the frame's height and width.
JPEG_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def declared_pixels(source: Path | bytes) -> int | None:
    """Width x height from the header of a file, given by its path or its bytes already read,
    without decoding; None if unknown.

    PNG and JPEG headers are read here, in a few small reads: the decoding threads share
    the GIL, and PIL's parsers, which read the other formats, hold it for tens of
    microseconds a frame (benchmarks/RESULTS.md).
    """
    try:
        with open(source, "rb") if isinstance(source, Path) else io.BytesIO(source) as handle:
            head = handle.read(24)
            if head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR":
                width, height = struct.unpack(">II", head[16:24])
                return width * height
            if head[:2] == b"\xff\xd8":
                pixels = _jpeg_pixels(handle)
                if pixels is not None:
                    return pixels
    except OSError:
        return None  # the decoder will say why
    return _pil_pixels(source if isinstance(source, Path) else io.BytesIO(source))


def _jpeg_pixels(handle) -> int | None:
    """Width x height from a JPEG's first frame header, walking the segments before it;
    None where the walk finds something unexpected (PIL then has its say)."""
    position = 2
    for _ in range(256):  # segments before the frame header: a few, in any real file
        handle.seek(position)
        segment = handle.read(9)
        if len(segment) < 4 or segment[0] != 0xFF:
            return None
        marker = segment[1]
        if marker == 0xFF:  # a fill byte before the marker
            position += 1
            continue
        if marker in JPEG_FRAME_MARKERS:
            if len(segment) < 9:
                return None
            height, width = struct.unpack(">HH", segment[5:9])
            return width * height if height else None  # height 0: given later (DNL)
        if marker in (0xD8, 0xD9, 0xDA) or 0xD0 <= marker <= 0xD7 or marker == 0x01:
            return None  # no frame header before the image data: unusual, let PIL say
        position += 2 + struct.unpack(">H", segment[2:4])[0]
    return None


def _pil_pixels(file: Path | io.BytesIO) -> int | None:
    from PIL import Image

    try:
        with Image.open(file) as image:
            width, height = image.size
            return width * height
    except Image.DecompressionBombError as exc:  # PIL's own, lower limit: it says the size
        match = re.search(r"\((\d+) pixels\)", str(exc))
        return int(match.group(1)) if match else None
    except Exception:  # not a format PIL reads, or corrupt: the decoder will say why
        return None


def check_size(source: str, pixels: int | None, max_pixels: int) -> None:
    if pixels is not None and pixels > max_pixels:
        raise FrameError(
            source,
            f"header declares {pixels} pixels, over the limit of {max_pixels} "
            "(raise it with --max-pixels)",
        )


READ_CHUNK = 1 << 20  # reads of a file that is not regular, or that grew while it was read


def read_file(path: Path) -> bytes:
    """The bytes of one input file, or FrameError naming it and why they cannot be had.

    Four system calls (open, fstat, read, close), where ``stat``, ``os.access`` and
    ``Path.read_bytes`` made eleven: each lets go of the GIL and must win it back, and a
    worker waits for it a fraction of a millisecond when 16 of them share it at JPEG's frame
    rate (benchmarks/RESULTS.md).
    """
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except PermissionError:
        raise FrameError(source, "permission denied") from None
    except OSError as exc:
        raise FrameError(source, exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        size = info.st_size if stat.S_ISREG(info.st_mode) else -1
        data = os.read(fd, size + 1 if size >= 0 else READ_CHUNK)
        if size < 0 or len(data) > size:  # not a regular file, or it grew: read to its end
            parts = [data]
            while part := os.read(fd, READ_CHUNK):
                parts.append(part)
            data = b"".join(parts)
    except OSError as exc:
        raise FrameError(source, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    if not data:
        raise FrameError(source, "empty file")
    return data


def read_image(path: Path, max_pixels: int) -> np.ndarray:
    """Decode one still image, or raise FrameError naming the file and the reason."""
    return decode_image(path, read_file(path), max_pixels)


def decode_image(path: Path, data: bytes, max_pixels: int) -> np.ndarray:
    """Decode the still image ``path`` from its bytes ``data``, already read."""
    source = str(path)
    if path.suffix.lower() in ANIMATION_EXTENSIONS:  # a one-frame GIF: not every cv2 reads GIF
        frame = next(_animation_frames(path, max_pixels), None)  # (imageio reads it again)
        if frame is None:
            raise FrameError(source, "not a decodable image (no frames)")
        return frame
    # imdecode of the bytes, not imread, so an unreadable file is told apart from a file
    # that is not an image, and both get a reason. (imread also decodes a truncated JPEG
    # that imdecode refuses, with a warning on stderr.) The file is read once: its header's
    # size is checked in the bytes read, before they are decoded.
    check_size(source, declared_pixels(data), max_pixels)
    tiff = path.suffix.lower() in (".tif", ".tiff")
    try:
        with opencv_silenced() if tiff else nullcontext():
            frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    except cv2.error as exc:  # OpenCV raises, rather than returning None, on some inputs
        raise FrameError(source, f"cannot decode ({exc.err or exc})") from None
    if frame is None:
        raise FrameError(source, "not a decodable image (corrupt, truncated or wrong type)")
    return frame


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

    multi_frame = True

    def frame_name(self, index: int) -> str:
        return f"{self.out_stem}_{index:0{FRAME_INDEX_DIGITS}d}.png"

    def frames(self, max_pixels: int) -> Iterator[Frame | FrameError]:
        """Its frames in order. A FrameError among them is a frame that cannot be read while
        the ones after it can (a corrupt TIFF page); a FrameError raised ends the source."""
        readers = {"video": _video_frames, "tiff": _tiff_frames, "animation": _animation_frames}
        for index, pixels in enumerate(readers[self.kind](self.path, max_pixels)):
            if isinstance(pixels, FrameError):
                yield pixels
            else:
                yield Frame(self.frame_name(index), f"{self.path} [frame {index}]", pixels)


def _video_frames(path: Path, max_pixels: int) -> Iterator[np.ndarray]:
    capture = cv2.VideoCapture(str(path))
    try:
        if not capture.isOpened():
            raise FrameError(str(path), "cannot open as a video (unknown format or corrupt)")
        width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
        check_size(str(path), width * height, max_pixels)
        expected = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        count = 0
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            count += 1
            yield frame
        if count == 0:
            raise FrameError(str(path), "video has no decodable frames")
        # Only these containers index every frame, so only their count can be trusted.
        if path.suffix.lower() in EXACT_COUNT_CONTAINERS and 0 < count < expected:
            raise FrameError(
                f"{path} [frame {count}]",
                f"video ended early: {count} of {expected} frames decoded (truncated?)",
            )
    finally:
        capture.release()


TIFF_CHUNK = 8  # pages decoded by one cv2.imreadmulti call: bounds the pages held at once


def _tiff_frames(path: Path, max_pixels: int) -> Iterator[np.ndarray | FrameError]:
    # cv2.imreadmulti keeps cv2.imread's conversions (16-bit TIFF is scaled differently
    # from PNG's high-byte strip). The pages are counted by walking the file's directories
    # (cv2.imcount stops, and PIL fails, where a truncated file's chain breaks).
    check_size(str(path), declared_pixels(path), max_pixels)
    pages, broken = tiff_directories(path)
    for start in range(0, pages, TIFF_CHUNK):
        count = min(TIFF_CHUNK, pages - start)
        mats = _tiff_pages(path, start, count)
        if len(mats) == count:
            yield from mats
            continue
        for index in range(start, start + count):  # which of them cannot be read
            page = _tiff_pages(path, index, 1)
            if page:
                yield page[0]
            else:
                yield FrameError(f"{path} [frame {index}]", "cannot decode TIFF page")
    if broken:
        raise FrameError(
            f"{path} [frame {pages}]",
            f"the file ends inside the directory of TIFF page {pages} (truncated?); "
            "the pages from this one on cannot be read",
        )


def _tiff_pages(path: Path, start: int, count: int) -> list[np.ndarray]:
    """Pages start .. start + count - 1 as cv2.imreadmulti decodes them; fewer (or none)
    where some cannot be decoded."""
    with opencv_silenced():  # libtiff's errors go through OpenCV's log; ours name the page
        try:
            ok, mats = cv2.imreadmulti(str(path), start, count, flags=cv2.IMREAD_COLOR)
        except cv2.error:
            return []
    return list(mats) if ok else []


TIFF_BYTE_ORDERS = {b"II": "<", b"MM": ">"}
TIFF_MAX_PAGES = 1 << 16  # a directory chain longer than this is taken as a loop


def tiff_directories(path: Path) -> tuple[int, bool]:
    """The pages of a TIFF file, counted by walking its chain of directories (IFDs), and
    whether the chain is broken: a directory that starts or ends past the end of the file.

    Only the header and the directories are read, a few bytes each. (0, False) where the
    file is not a TIFF at all: the decoder says why.
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(16)
            order = TIFF_BYTE_ORDERS.get(head[:2])
            if order is None or len(head) < 8:
                return 0, False
            (magic,) = struct.unpack(order + "H", head[2:4])
            if magic == 42:  # classic: 4-byte offsets, 2-byte counts, 12-byte entries
                offset_format, count_format, entry_size = "I", "H", 12
                (offset,) = struct.unpack(order + "I", head[4:8])
            elif magic == 43 and len(head) >= 16:  # BigTIFF: 8-byte offsets and counts
                offset_format, count_format, entry_size = "Q", "Q", 20
                (offset,) = struct.unpack(order + "Q", head[8:16])
            else:
                return 0, False
            offset_size = struct.calcsize(offset_format)
            count_size = struct.calcsize(count_format)
            pages, seen = 0, set()
            while offset and offset not in seen and pages < TIFF_MAX_PAGES:
                seen.add(offset)
                handle.seek(offset)
                raw = handle.read(count_size)
                if len(raw) < count_size:
                    return pages, True
                (entries,) = struct.unpack(order + count_format, raw)
                end = offset + count_size + entries * entry_size + offset_size
                if end > size:
                    return pages, True
                handle.seek(end - offset_size)
                (offset,) = struct.unpack(order + offset_format, handle.read(offset_size))
                pages += 1
            return pages, False
    except OSError:
        return 0, False


_silenced_lock = threading.Lock()
_silenced = {"count": 0, "level": None}


@contextmanager
def opencv_silenced():
    """OpenCV's log off while any thread is inside (libtiff reports through it, straight to
    the process's stderr, on every page it cannot read; edgecli names the page itself).

    The level is process-wide, not per thread, so it is counted: the first thread in saves
    it and turns the log off, the last one out puts it back. Other OpenCV users in the
    process lose their log messages in between.
    """
    logging = cv2.utils.logging
    with _silenced_lock:
        if _silenced["count"] == 0:
            _silenced["level"] = logging.getLogLevel()
            logging.setLogLevel(logging.LOG_LEVEL_SILENT)
        _silenced["count"] += 1
    try:
        yield
    finally:
        with _silenced_lock:
            _silenced["count"] -= 1
            if _silenced["count"] == 0:
                logging.setLogLevel(_silenced["level"])


def _animation_frames(path: Path, max_pixels: int) -> Iterator[np.ndarray]:
    import imageio.v3 as iio

    check_size(str(path), declared_pixels(path), max_pixels)
    index = 0  # the frame being read: an error while fetching it names this one
    try:
        for pixels in iio.imiter(path):
            yield to_bgr8(np.asarray(pixels), f"{path} [frame {index}]")
            index += 1
    except FrameError:
        raise
    except Exception as exc:  # imageio's plugins raise many types on corrupt data
        reason = f"cannot decode animation ({type(exc).__name__}: {exc})"
        raise FrameError(f"{path} [frame {index}]", reason) from None


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


def _page_count(path: Path) -> int | None:
    """Frames in a GIF or TIFF as PIL counts them; None where PIL opens the file but cannot
    count them (frames past the first are corrupt or cut off)."""
    from PIL import Image

    try:
        image = Image.open(path)
    except Exception:  # undecodable: let the still-image path report it per frame
        return 1
    with image:
        try:
            return getattr(image, "n_frames", 1)
        except Exception:
            return None


def _is_multi_frame(path: Path, suffix: str) -> bool:
    if suffix in (".tif", ".tiff"):
        pages, broken = tiff_directories(path)
        return pages > 1 or (pages == 1 and broken)  # broken: the pages after it are lost
    count = _page_count(path)
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


def _folder_files(folder: Path, recursive: bool, exclude: Path | None) -> list[Path]:
    pattern = "**/*" if recursive else "*"
    files = [
        p
        for p in folder.glob(pattern)
        if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file() and not p.name.startswith(".")
    ]
    if exclude is not None:  # an output folder inside the input: its PNGs are not frames
        exclude = exclude.resolve()
        files = [p for p in files if not p.resolve().is_relative_to(exclude)]
    return sorted(files, key=lambda p: natural_key(p.relative_to(folder).as_posix()))


def discover(
    input_arg: str | os.PathLike, *, recursive: bool = False, exclude: Path | None = None
) -> list:
    """Every source INPUT names, in order, with output names fixed and collisions refused.

    Files under ``exclude`` (the output folder) are left out of a recursive folder scan.
    """
    text = os.fspath(input_arg)
    path = Path(text)
    if path.is_dir():
        files = _folder_files(path, recursive, exclude if recursive else None)
        if not files and recursive and exclude is not None and _folder_files(path, True, None):
            raise OptionError(
                f"{path}: every image in this folder lies in the output folder {exclude}, which "
                "a recursive scan leaves out (it holds outputs, not frames); choose an output "
                "folder outside the input"
            )
        if not files:
            where = "or its subfolders " if recursive else ""
            raise InputError(
                f"{path}: no frames in this folder {where}(looked for "
                f"{', '.join(IMAGE_EXTENSIONS)})"
            )
        sources = [classify(f, f.relative_to(path).with_suffix("").as_posix()) for f in files]
    elif path.is_file():
        sources = [classify(path, path.stem)]
    elif GLOB_CHARS.search(text):
        matches = sorted(
            (Path(m) for m in glob.glob(text, recursive=True) if Path(m).is_file()),
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
) -> list:
    """Every source of one INPUT or several, in the order given, output names checked across
    all of them (as :func:`discover` does for one); a file that two INPUTs name is refused."""
    texts = input_list(inputs)
    if len(texts) == 1:
        return discover(texts[0], recursive=recursive, exclude=exclude)
    sources: list = []
    given: dict[tuple[int, int], Path] = {}  # (device, inode) of a file -> the path named first
    for text in texts:
        found = discover(text, recursive=recursive, exclude=exclude)
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
            for path in _folder_files(out_dir, True, None):
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


def count_frames(sources: list) -> int | None:
    """Frames to expect, for the progress bar; None when a video cannot say."""
    total = 0
    for source in sources:
        if not source.multi_frame:
            total += 1
        elif source.kind == "video":
            capture = cv2.VideoCapture(str(source.path))
            frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) if capture.isOpened() else 0
            capture.release()
            if frames <= 0:
                return None
            total += frames
        elif source.kind == "tiff":
            pages, broken = tiff_directories(source.path)
            total += pages + broken  # a broken chain: one failure after the pages it has
        else:
            total += max(_page_count(source.path) or 1, 1)
    return total
