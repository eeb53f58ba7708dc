"""Video clips made and taken apart with the ffmpeg binary of imageio-ffmpeg (a dev extra).

Imported, not skipped: without imageio-ffmpeg the tests that use it fail at collection.
"""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

import imageio_ffmpeg
import numpy as np

FFMPEG = imageio_ffmpeg.get_ffmpeg_exe()


def encode(path: Path, frames: list[np.ndarray], *, pix_fmt: str = "yuv420p", args=()) -> Path:
    """Encode BGR frames with libx264 (``args`` adds tags or options); returns ``path``."""
    height, width = frames[0].shape[:2]
    command = [FFMPEG, "-v", "error", "-f", "rawvideo", "-pix_fmt", "bgr24"]
    command += ["-s", f"{width}x{height}", "-r", "10", "-i", "-"]
    command += ["-c:v", "libx264", "-preset", "ultrafast", "-crf", "12", "-pix_fmt", pix_fmt]
    command += [*args, "-y", str(path)]
    subprocess.run(command, input=b"".join(f.tobytes() for f in frames), check=True)
    return path


def decode_planes(path: Path) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """FFmpeg's decode of an 8-bit 4:2:0 stream as (Y, U, V) planes, unconverted and unturned
    (a display matrix is not applied), one per decoded frame (none repeated for a constant
    rate)."""
    info = probe(path)
    width, height = info["width"], info["height"]
    raw = subprocess.run(
        [FFMPEG, "-v", "error", "-noautorotate", "-i", str(path), "-fps_mode", "passthrough"]
        + ["-f", "rawvideo", "-"],
        capture_output=True,
        check=True,
    ).stdout
    cw, ch = (width + 1) // 2, (height + 1) // 2
    size = width * height + 2 * cw * ch
    assert len(raw) % size == 0, f"{path}: {len(raw)} bytes is no whole number of 4:2:0 frames"
    planes = []
    for start in range(0, len(raw), size):
        frame = np.frombuffer(raw, np.uint8, size, start)
        y = frame[: width * height].reshape(height, width)
        u = frame[width * height : width * height + cw * ch].reshape(ch, cw)
        v = frame[width * height + cw * ch :].reshape(ch, cw)
        planes.append((y, u, v))
    return planes


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts + [text[start:].strip()]


def probe(path: Path) -> dict:
    """The video stream's pix_fmt, color_range, color_space, width and height, as ffprobe names
    them (read from ``ffmpeg -i``; the range and matrix are None where the stream leaves them
    unspecified)."""
    stderr = subprocess.run([FFMPEG, "-hide_banner", "-i", str(path)], capture_output=True).stderr
    line = re.search(r"Video: (.*)", stderr.decode()).group(1)
    fields = _split_top_level(line)
    pix_fmt, _, tags = fields[1].partition("(")
    tags = [t.strip() for t in tags.rstrip(")").split(",") if t.strip()]
    width, height = map(int, re.match(r"(\d+)x(\d+)", fields[2]).groups())
    color_range = next((t for t in tags if t in ("tv", "pc")), None)
    matrices = [t.split("/")[0] for t in tags if t not in ("tv", "pc", "progressive")]
    return {
        "pix_fmt": pix_fmt,
        "color_range": color_range,
        "color_space": matrices[0] if matrices else None,
        "width": width,
        "height": height,
    }


def key_frames(path: Path) -> list[int]:
    """The indices of the frames FFmpeg decodes as keyframes, in output order (its showinfo
    filter's ``iskey``)."""
    stderr = subprocess.run(
        [FFMPEG, "-hide_banner", "-i", str(path), "-vf", "showinfo", "-f", "null", "-"],
        capture_output=True,
        check=True,
    ).stderr.decode()
    return [int(n) for n in re.findall(r"\bn:\s*(\d+)\b.*?\biskey:1\b", stderr)]


# Bytes of a box's own fields before its children: stsd's entry count, a visual sample entry's.
VISUAL_ENTRIES = (b"avc1", b"avc3", b"hvc1", b"hev1", b"vp09", b"av01")
BOX_FIELDS = {b"stsd": 8, **dict.fromkeys(VISUAL_ENTRIES, 78)}


def box_chain(data: bytes, path) -> list[tuple[int, int]]:
    """(offset, size) of each box of an MP4 file's ``data`` along ``path``, the first of its
    type at each level (None: the first child, whatever its type)."""
    chain, start, end = [], 0, len(data)
    for kind in path:
        pos = start
        while True:
            assert pos + 8 <= end, f"no {kind} box"
            size, found = struct.unpack_from(">I4s", data, pos)
            if kind is None or found == kind:
                break
            pos += size
        chain.append((pos, size))
        start, end = pos + 8 + BOX_FIELDS.get(found, 0), pos + size
    return chain
