"""Test media: real photographs, hand-made frames, and video files written on demand."""

from __future__ import annotations

import itertools
from pathlib import Path

import cv2
import numpy as np

from edgecli.options.params import BORDERS, NORMS

REPO = Path(__file__).resolve().parent.parent
SAMPLE_FRAMES = REPO / "sample_frames"

# Every border x norm, with thresholds at the edges of the range.
EDGE_OPTIONS = [
    {"norm": n, "border": b, "threshold": t}
    for n, b, t in itertools.product(NORMS, BORDERS, (0, 1, 100, 1019, 1020, 2040, 5000))
]


def option_id(o: dict) -> str:
    return f"{o['norm']}-{o['border']}-t{o['threshold']}"


def photo(height: int, width: int, seed: int = 0) -> np.ndarray:
    """A crop of the sample photographs (BGR uint8), tiled if the size asks for more."""
    frames = sorted(SAMPLE_FRAMES.glob("pan_*"))
    source = cv2.imread(str(frames[seed % len(frames)]), cv2.IMREAD_COLOR)
    reps = (-(-height // source.shape[0]), -(-width // source.shape[1]), 1)
    return np.ascontiguousarray(np.tile(source, reps)[:height, :width])


def gray_frame(values) -> np.ndarray:
    """A BGR frame whose luma equals ``values`` exactly (gray pixels keep their value)."""
    values = np.asarray(values, dtype=np.uint8)
    return np.repeat(values[..., np.newaxis], 3, axis=-1)


def write_video(path: Path, frames: list[np.ndarray], fourcc: str = "MJPG", fps: int = 10):
    """Write frames with cv2.VideoWriter; returns the frames as the reader decodes them."""
    h, w = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (w, h))
    assert writer.isOpened(), f"this OpenCV cannot write {fourcc} video"
    for frame in frames:
        writer.write(frame)
    writer.release()
    return read_frames(path)


def read_frames(path: Path) -> list[np.ndarray]:
    """Every frame of a video as cv2.VideoCapture.read() gives it (edgecli's CPU decoder)."""
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def cv2_layouts(seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Frames as cv2 users hold them (a 17x31 gray frame, a BGRA one, a batch of BGRA ones),
    each with its BGR conversion by cv2.cvtColor."""
    bgra = cv2.cvtColor(photo(17, 31, seed=seed), cv2.COLOR_BGR2BGRA)
    bgra[..., 3] = np.arange(17 * 31).reshape(17, 31) % 256  # an alpha that must not matter
    gray = cv2.cvtColor(photo(17, 31, seed=seed + 1), cv2.COLOR_BGR2GRAY)
    batch = np.stack([bgra, bgra[::-1].copy()])
    return {
        "gray": (gray, cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)),
        "bgra": (bgra, cv2.cvtColor(bgra, cv2.COLOR_BGRA2BGR)),
        "bgra batch": (batch, np.stack([cv2.cvtColor(f, cv2.COLOR_BGRA2BGR) for f in batch])),
    }
