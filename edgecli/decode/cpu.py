"""Decoding on the CPU: a file's bytes or a video's frames to the contract's frames (8-bit BGR,
H x W x 3, as ``cv2.imread(path, cv2.IMREAD_COLOR)`` or ``cv2.VideoCapture.read()`` yields them:
alpha dropped, gray replicated, 16-bit scaled to 8), sizes read from headers before decoding,
and files read whole in the fewest system calls. :mod:`edgecli.inputs.sources` says which frames a
run has; the GPU's decoders are :mod:`.gpu`.
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import cv2
import numpy as np

from .. import native
from ..errors import FrameError
from ..output.png import PNG_SIGNATURE
from .jpeg_header import UNWALKED, scan_damage
from .kinds import ANIMATION_EXTENSIONS
from .mp4 import MP4_CONTAINERS, frame_count
from .png_layout import PngDamage, PngLayout, gpu_reason, read_layout

# Containers whose index gives an exact frame count, so a shorter decode means truncation.
EXACT_COUNT_CONTAINERS = (*MP4_CONTAINERS, ".avi")
# Containers with no frame count (cv2 estimates one from the duration and the frame rate,
# which a variable frame rate makes wrong either way) whose header declares their size: a
# file shorter than that is cut, and the estimate then says about how many frames it lacks.
MATROSKA_CONTAINERS = (".mkv", ".webm")


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
    the GIL, and PIL's parsers, which read the other formats, hold it while they parse.
    """
    try:
        with open(source, "rb") if isinstance(source, Path) else io.BytesIO(source) as handle:
            head = handle.read(24)
            if len(head) == 24 and head[:8] == PNG_SIGNATURE and head[12:16] == b"IHDR":
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
    from PIL import Image  # only the other formats need it: kept off every run's start-up

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


def read_error(source: str, exc: OSError) -> FrameError:
    """The FrameError of a read of ``source`` that failed with ``exc``."""
    if isinstance(exc, PermissionError):
        return FrameError(source, "permission denied")
    return FrameError(source, exc.strerror or str(exc))


def read_file(path: Path) -> bytes:
    """The bytes of one input file, or FrameError naming it and why they cannot be had.

    Four system calls (open, fstat, read, close), where ``stat``, ``os.access`` and
    ``Path.read_bytes`` made eleven: each lets go of the GIL and must win it back, a wait
    that grows with the number of worker threads sharing it.
    """
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise read_error(source, exc) from None
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
        raise read_error(source, exc) from None
    finally:
        os.close(fd)
    if not data:
        raise FrameError(source, "empty file")
    return data


def read_walked(path: Path) -> tuple[bytes, object]:
    """The bytes of one input file as :func:`read_file` reads them, and the C walk's verdict on
    them for :func:`scan_damage` (UNWALKED where it did not run). Where edgecli._native is
    built, one call reads the file and walks it, letting go of the GIL twice where reading and
    walking apart would five times: a wait to win it back that grows with the worker threads.
    """
    reader = getattr(native.c, "read_walked", None)
    if reader is not None:
        try:
            read = reader(path)
        except OSError as exc:
            raise read_error(str(path), exc) from None
        if read is not None:
            return read
    return read_file(path), UNWALKED


def _references(buffer: bytearray) -> int:
    return sys.getrefcount(buffer)


def _unshared() -> int:
    """What :func:`_references` says of a buffer held by one local variable alone: its count
    as this interpreter counts (3.14 borrows some references that earlier versions count)."""
    buffer = bytearray()
    return _references(buffer)


_UNSHARED = _unshared()


class ReadBuffers:
    """Buffers that files are read into whole and given back once their bytes are spent, for
    the files a run holds by the hundred (those read for the GPU's PNG decoder, each some
    megabytes): a file read into memory just allocated faults in its pages as it is read, and
    the faults of every thread wait on one another. A buffer's pages are touched by the first
    file read into it, by none after it. The buffers hold what the run held at once, at most,
    until the run ends (and those of files dropped unread, which the garbage collector frees).

    :meth:`read` takes the smallest free buffer that holds the file, else a new one an eighth
    larger (frames of one folder differ a little in size); :meth:`give` gives it back. Any
    thread may call either.
    """

    def __init__(self) -> None:
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def _take(self, size: int) -> bytearray:
        with self._lock:
            free = self._free
            fitting = (i for i, buffer in enumerate(free) if len(buffer) >= size)
            smallest = min(fitting, key=lambda i: len(free[i]), default=None)
            if smallest is not None:
                return free.pop(smallest)
        return native.c.uninitialized(size + size // 8)

    def read(self, path: Path) -> bytes | memoryview:
        """The bytes of the file at ``path``, as :func:`read_file` reads them (and words why
        they cannot be had), in a buffer of these where the native reader is built and the
        file is a regular one of a steady size (else bytes of their own): :meth:`give` them
        back once spent."""
        reader = getattr(native.c, "read_into", None)
        read = None
        if reader is not None:
            try:
                read = reader(path, self._take)
            except OSError as exc:
                raise read_error(str(path), exc) from None
        if read is None:
            return read_file(path)
        buffer, size = read
        return memoryview(buffer)[:size]

    def give(self, data: bytes | memoryview) -> None:
        """Give back the buffer of ``data``, one of :meth:`read`'s, whose bytes nothing reads
        any more (``data`` is released: a later use of it raises; one still exported, to a
        numpy array say, keeps its buffer out of use). Bytes of their own are left alone."""
        if not isinstance(data, memoryview):
            return
        buffer = data.obj
        try:
            data.release()
        except BufferError:  # exported itself
            return
        if _references(buffer) > _UNSHARED:  # another view of it lives
            return
        with self._lock:
            self._free.append(buffer)


def read_image(path: Path, max_pixels: int) -> np.ndarray:
    """Decode one still image, or raise FrameError naming the file and the reason."""
    data, walked = read_walked(path)
    return decode_image(path, data, max_pixels, walked)


def decode_image(
    path: Path, data: bytes | memoryview, max_pixels: int, walked: object = UNWALKED
) -> np.ndarray:
    """Decode the still image ``path`` from its bytes ``data``, already read (and, where
    ``walked`` is not UNWALKED, their scans walked: that verdict)."""
    source = str(path)
    if path.suffix.lower() in ANIMATION_EXTENSIONS:  # a one-frame GIF: not every cv2 reads GIF
        frame = next(animation_frames(path, max_pixels), None)  # (imageio reads it again)
        if frame is None:
            raise FrameError(source, "not a decodable image (no frames)")
        return frame
    # imdecode of the bytes, not imread, so an unreadable file is told apart from a file
    # that is not an image, and both get a reason. (imread also decodes a truncated JPEG
    # that imdecode refuses, with a warning on stderr.) The file is read once: its header's
    # size is checked in the bytes read, before they are decoded.
    check_size(source, declared_pixels(data), max_pixels)
    if data[:8] == PNG_SIGNATURE:
        # libpng would refuse a damaged file in a line of its own on the process's stderr
        # (OpenCV keeps its error handler, and fd 2 is every thread's): so the walk refuses it
        # first, with edgecli's reason, and libpng decodes only files whose chunks are whole.
        try:
            layout = read_layout(data)
        except PngDamage as damage:
            raise FrameError(source, damage.reason) from None
        frame = png_frame(data, layout)
        if frame is not None:
            return frame
    else:
        damage = scan_damage(data, walked)
        if isinstance(damage, str):
            raise FrameError(source, damage)
    tiff = path.suffix.lower() in (".tif", ".tiff")
    try:
        with opencv_silenced() if tiff else nullcontext():
            frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    except cv2.error as exc:  # OpenCV raises, rather than returning None, on some inputs
        raise FrameError(source, f"cannot decode ({exc.err or exc})") from None
    if frame is None:
        raise FrameError(source, "not a decodable image (corrupt, truncated or wrong type)")
    return frame


# PNG colour types edgecli._native decodes, of 8 or 16 bits a sample, by their channels: gray,
# gray+alpha, RGB, RGBA. (Palettes, gray of 1 to 4 bits, interlacing and turned frames are
# libpng's, through cv2.)
NATIVE_PNG_CHANNELS = {0: 1, 4: 2, 2: 3, 6: 4}


def png_frame(data: bytes, layout: PngLayout) -> np.ndarray | None:
    """cv2.imdecode's frame of the PNG ``data`` (its ``layout`` read), decoded by
    ``edgecli._native`` where it takes the file and libpng would decode it without a word
    (``png_decode``); None elsewhere, for cv2 to decode. libpng spends a photograph's frame in
    its Paeth filter, which the C code undoes without branches, and in its inflate, which
    libdeflate does faster where the system has it."""
    decode = getattr(native.c, "png_decode", None)
    channels = NATIVE_PNG_CHANNELS.get(layout.colour_type)
    if decode is None or channels is None or layout.bit_depth not in (8, 16):
        return None
    if layout.orientation != 1 or gpu_reason(layout) is not None:  # libpng's own reading
        return None
    frame = np.empty((layout.height, layout.width, 3), np.uint8)
    decoded = decode(
        data, layout.spans, layout.width, layout.height, channels, layout.bit_depth, frame
    )
    return frame if decoded else None


def _check_video(capture, path: Path, max_pixels: int) -> None:
    """FrameError unless ``capture`` opened ``path`` and its frames are within max_pixels."""
    if not capture.isOpened():
        raise FrameError(str(path), "cannot open as a video (unknown format or corrupt)")
    width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
    height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    check_size(str(path), width * height, max_pixels)


def video_frames(
    path: Path, max_pixels: int, start: int = 0, stop: int | None = None, kept=None
) -> Iterator[tuple[int, np.ndarray]]:
    """``(index, frame)`` for the frames ``start`` to ``stop`` (None: the end) of the video at
    ``path`` that ``kept(index)`` keeps (None: all). The others are decoded but not converted
    (``grab``): decoding in order is what makes each frame the one a full run reads."""
    capture = cv2.VideoCapture(str(path))
    try:
        _check_video(capture, path, max_pixels)
        expected = _expected_frames(path, capture)
        index = 0
        while stop is None or index < stop:
            if index < start or (kept is not None and not kept(index)):
                if not capture.grab():
                    break
            else:
                ok, frame = capture.read()
                if not ok:
                    break
                yield index, frame
            index += 1
        if index == 0:
            raise FrameError(str(path), "video has no decodable frames")
        if stop is None or index < stop:  # the decoder ran out of frames
            shortfall = _shortfall(path, capture, index, expected)
            if shortfall is not None:
                total, reason = shortfall
                end = total if stop is None else min(stop, total)
                wanted = range(max(index, start), end)
                lost = sum(1 for i in wanted if kept is None or kept(i))
                raise FrameError(f"{path} [frame {index}]", reason, max(lost, 1))
    finally:
        capture.release()


def _expected_frames(path: Path, capture) -> int | None:
    """The frames a whole decode of the video gives, where its container says so exactly: an
    MP4's sample table, where FFmpeg shows every sample (:func:`.mp4.frame_count`), an AVI's
    index; None elsewhere."""
    suffix = path.suffix.lower()
    if suffix in MP4_CONTAINERS:
        return frame_count(path)
    if suffix in EXACT_COUNT_CONTAINERS:
        return int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) or None
    return None


def _shortfall(path: Path, capture, decoded: int, exact: int | None) -> tuple[int, str] | None:
    """The frames the video at ``path`` has, and why it is cut short, where its decoder
    (``capture``) gave only ``decoded`` of them; None where it is not cut, as far as the
    container says. ``exact``: the count :func:`_expected_frames` found, if any."""
    if exact is not None:
        if decoded >= exact:
            return None
        return exact, f"video ended early: {decoded} of {exact} frames decoded (truncated?)"
    if path.suffix.lower() not in MATROSKA_CONTAINERS:
        return None
    # Both must hold: a file cut only in the index after its last frame (Cues) lost none,
    # and a variable frame rate makes the estimate too high for a whole file.
    estimate = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    sizes = matroska_sizes(path) if decoded < estimate else None
    if sizes is None or sizes[0] >= sizes[1]:
        return None
    return estimate, (
        f"video ended early: {decoded} of about {estimate} frames decoded (truncated: the "
        f"file has {sizes[0]} of the {sizes[1]} bytes its header declares)"
    )


_EBML_HEADER, _MATROSKA_SEGMENT = 0x1A45DFA3, 0x18538067


def matroska_sizes(path: Path) -> tuple[int, int] | None:
    """The size of the Matroska or WebM file at ``path`` and the size its Segment element
    declares (where it ends); None where the file is not one or does not declare its size
    (a live stream's Segment has an unknown size)."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(64)
    except OSError:
        return None
    position = 0
    for expected_id in (_EBML_HEADER, _MATROSKA_SEGMENT):
        element = _ebml_id(head, position)
        if element is None or element[0] != expected_id:
            return None
        length = _ebml_size(head, element[1])
        if length is None:
            return None
        body, declared = length
        if declared is None:  # unknown size
            return None
        if expected_id == _MATROSKA_SEGMENT:
            return size, body + declared
        position = body + declared
        if position > len(head):
            return None  # an EBML header this long is not one ffmpeg or mkvmerge writes
    return None


def _ebml_id(data: bytes, position: int) -> tuple[int, int] | None:
    """An EBML element ID at ``position`` (its marker bits kept) and where it ends."""
    if position >= len(data) or data[position] == 0:
        return None
    width = 8 - data[position].bit_length() + 1
    if width > 4 or position + width > len(data):
        return None
    return int.from_bytes(data[position : position + width], "big"), position + width


def _ebml_size(data: bytes, position: int) -> tuple[int, int | None] | None:
    """An EBML size at ``position``: where it ends and its value (None: unknown, all ones)."""
    if position >= len(data) or data[position] == 0:
        return None
    width = 8 - data[position].bit_length() + 1
    if position + width > len(data):
        return None
    value = int.from_bytes(data[position : position + width], "big") & ((1 << (7 * width)) - 1)
    return position + width, None if value == (1 << (7 * width)) - 1 else value


# Sampling a video, a frame this many or fewer ahead is decoded on to; one further ahead is
# sought (FFmpeg then decodes on from the keyframe before it, which in x264's default GOP of 250
# frames lies half a GOP back on average).
SEEK_GAP = 120


def video_frames_at(path: Path, indices, max_pixels: int) -> dict[int, np.ndarray]:
    """Frames ``indices`` of the video at ``path`` (those it has), for the samples of ``-t
    auto`` and ``edgecli preview``: in one pass, decoding on to the next one where it is near
    and seeking (``CAP_PROP_POS_FRAMES``) where it is far; where a seek does not land on its
    frame, the frames are decoded in order from the start instead."""
    wanted = sorted(set(indices))
    capture = cv2.VideoCapture(str(path))
    found: dict[int, np.ndarray] = {}
    try:
        _check_video(capture, path, max_pixels)
        position = 0  # the frame the next grab decodes
        for index in wanted:
            if index - position > SEEK_GAP:
                if not capture.set(cv2.CAP_PROP_POS_FRAMES, index):
                    break
                position = index
            while position < index and capture.grab():
                position += 1
            ok, frame = capture.read() if position == index else (False, None)
            if not ok or int(capture.get(cv2.CAP_PROP_POS_FRAMES)) != index + 1:
                break
            found[index] = frame
            position = index + 1
        else:
            return found
    finally:
        capture.release()
    kept = set(wanted)
    return {
        i: f
        for i, f in video_frames(path, max_pixels, wanted[0], wanted[-1] + 1, kept.__contains__)
    }


TIFF_CHUNK = 8  # pages decoded by one cv2.imreadmulti call: bounds the pages held at once


def tiff_frames(path: Path, max_pixels: int) -> Iterator[np.ndarray | FrameError]:
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


def animation_frames(path: Path, max_pixels: int) -> Iterator[np.ndarray]:
    import imageio.v3 as iio  # slow to import, and only animations need it

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


def page_count(path: Path) -> int | None:
    """Frames in a GIF or TIFF as PIL counts them; None where PIL opens the file but cannot
    count them (frames past the first are corrupt or cut off)."""
    from PIL import Image  # only the other formats need it: kept off every run's start-up

    try:
        image = Image.open(path)
    except Exception:  # undecodable: let the still-image path report it per frame
        return 1
    with image:
        try:
            return getattr(image, "n_frames", 1)
        except Exception:
            return None
