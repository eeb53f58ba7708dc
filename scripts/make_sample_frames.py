"""Make sample_frames/: a short camera pan over a photograph that scikit-image ships.

Run from the repository root (needs scikit-image, which is not a dependency of edgecli):

    python scripts/make_sample_frames.py

Twelve 237x321 frames (neither side a multiple of 16 or 32): ten JPEGs and two PNGs, so
the smoke test covers both decoders. Then it writes sample_frames/expected.json, the
SHA-256 of each frame's expected edge pixels under the default options, which the smoke
test compares the installed command's output with.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
from skimage import data

from edgecli.edges.reference import detect_frame
from edgecli.options.params import Options

OUT = Path("sample_frames")
HEIGHT, WIDTH = 237, 321
FRAMES = 12
PNG_FRAMES = {10, 11}


def pan_frames() -> list[np.ndarray]:
    photo = data.rocket()[:, :, ::-1]  # RGB -> BGR, 427 x 640
    rows, cols = photo.shape[:2]
    frames = []
    for i in range(FRAMES):
        x = round(i * (cols - WIDTH) / (FRAMES - 1))
        y = round((rows - HEIGHT) * (0.3 + 0.4 * i / (FRAMES - 1)))
        frames.append(np.ascontiguousarray(photo[y : y + HEIGHT, x : x + WIDTH]))
    return frames


def pixel_digest(edges: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(edges).tobytes()).hexdigest()


def main() -> None:
    OUT.mkdir(exist_ok=True)
    expected = {}
    for i, frame in enumerate(pan_frames()):
        name = f"pan_{i:03d}." + ("png" if i in PNG_FRAMES else "jpg")
        params = [] if i in PNG_FRAMES else [cv2.IMWRITE_JPEG_QUALITY, 88]
        cv2.imwrite(str(OUT / name), frame, params)
        decoded = cv2.imread(str(OUT / name), cv2.IMREAD_COLOR)
        expected[Path(name).with_suffix(".png").name] = {
            "source": name,
            "shape": list(decoded.shape[:2]),
            "edges_sha256": pixel_digest(detect_frame(decoded, Options())),
        }
    manifest = {
        "options": Options().edge_params(),
        "note": "SHA-256 of the (H, W) uint8 0/255 edge pixels, row-major; made by "
        "scripts/make_sample_frames.py",
        "frames": expected,
    }
    (OUT / "expected.json").write_text(json.dumps(manifest, indent=2) + "\n")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(expected)} frames to {OUT}/ ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
