"""What NVDEC gives for each clip, against cv2.VideoCapture: how many frames, in which order,
and whether each equals cv2's frame once converted and turned as edgecli.decode.nvdec plans it
(issue 38: edgecli.decode.nvdec.ORDER_CHECKED lists the codecs and containers for which this
showed PyNvVideoCodec's frames are cv2's, in cv2's number and order).

    python benchmarks/nvdec_order.py tests/data/nvdec_*.mp4 tests/data/*.mkv tests/data/*.webm

For each clip, the two ways edgecli decodes on NVDEC: PyNvVideoCodec's SimpleDecoder (H.264
in MP4; tried also with ``need_scanned_stream_metadata``, for containers that do not count
their frames) and its demuxer feeding a decoder packet by packet (every other kind).
Each NVDEC frame is converted on the host (edgecli.decode.yuv's closed form for the planned
conversion, numpy's turn) and looked up among cv2's frames: the line says which of cv2's
frames each one is (``-`` where none), so a reordering or a dropped frame shows. GPU only.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from functools import partial
from pathlib import Path

import cupy
import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from edgecli.decode import nvdec, yuv  # noqa: E402
from edgecli.decode.engines import import_nvc, nvdec_missing  # noqa: E402
from edgecli.decode.video_file import describe  # noqa: E402


def digest(frame: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(frame).tobytes()).hexdigest()


def cv2_frames(path: Path) -> list[np.ndarray]:
    capture, frames = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG), []
    while (frame := capture.read()[1]) is not None:
        frames.append(frame)
    capture.release()
    return frames


def converted(plan: nvdec.NvdecPlan, frame, height: int, width: int) -> np.ndarray | None:
    """An NVDEC frame (NV12) as BGR by ``plan``, turned; None for deeper frames. Called inside
    a non-default stream: the library's DLPack export refuses the legacy default stream."""
    planes = cupy.from_dlpack(frame).get(stream=cupy.cuda.get_current_stream())
    cupy.cuda.get_current_stream().synchronize()
    if planes.dtype != np.uint8:
        return None
    uv = planes[height : height + height // 2, : 2 * ((width + 1) // 2)]
    bgr = yuv.nv12_to_bgr(planes[:height, :width], uv, plan.conversion)
    return np.rot90(bgr, -plan.rotation // 90)


def simple(path: Path, scanned: bool, convert) -> list:
    """SimpleDecoder's frames, each converted by ``convert(frame, height, width)`` as it comes:
    the decoder reuses a batch's buffers for the next."""
    nvc = import_nvc()
    decoder = nvc.SimpleDecoder(
        str(path), gpu_id=0, use_device_memory=True, need_scanned_stream_metadata=scanned,
        output_color_type=nvc.OutputColorType.NATIVE,
    )  # fmt: skip
    metadata, found = decoder.get_stream_metadata(), []
    while len(found) < len(decoder):
        batch = decoder.get_batch_frames(min(16, len(decoder) - len(found)))
        if not batch:
            break
        found += [convert(frame, metadata.height, metadata.width) for frame in batch]
    return found


def packets(path: Path, convert) -> list:
    """The demuxer's packets through a decoder, each frame converted as it comes."""
    nvc = import_nvc()
    demuxer = nvc.CreateDemuxer(str(path))
    decoder = nvc.CreateDecoder(
        gpuid=0, codec=demuxer.GetNvCodecId(), cudacontext=0,
        cudastream=cupy.cuda.get_current_stream().ptr, usedevicememory=True,
    )  # fmt: skip
    height, width = demuxer.Height(), demuxer.Width()
    return [convert(frame, height, width) for packet in demuxer for frame in decoder.Decode(packet)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clips", nargs="+", type=Path)
    args = parser.parse_args()
    cupy.cuda.Device(0).use()
    for path in args.clips:
        plan = nvdec.plan_video(path, lambda *stream: nvdec_missing(0, *stream), False)
        plan = plan if isinstance(plan, nvdec.NvdecPlan) else None
        print(f"== {path.name}: {plan}")
        if plan is None:
            stream = describe(path)
            print(f"   not planned: {stream}")
            if isinstance(stream, str):
                continue
            plan = nvdec.NvdecPlan(nvdec.nearest_conversion(stream.colour), stream.depth,
                                   stream.rotation, "not planned")  # fmt: skip
        reference = cv2_frames(path)
        index = {digest(frame): i for i, frame in reversed(list(enumerate(reference)))}
        ways = {"simple": (simple, False), "simple-scanned": (simple, True), "packets": (packets,)}
        for name, (decode, *options) in ways.items():
            try:
                with cupy.cuda.Stream(non_blocking=True):
                    found = decode(path, *options, partial(converted, plan))
                order = [index.get(digest(f), "-") if f is not None else "?" for f in found]
            except Exception as exc:  # the library refusing is an answer too
                print(f"   {name:<15} failed: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            same = order == list(range(len(reference)))
            for i, (frame, at) in enumerate(zip(found, order, strict=True)):
                if at == "-" and i < len(reference) and frame.shape == reference[i].shape:
                    apart = np.abs(frame.astype(np.int16) - reference[i]).max()
                    print(f"   {name:<15} frame {i} matches none of cv2's; {apart} from cv2's {i}")
                    break
            print(f"   {name:<15} {len(found)} frames (cv2 {len(reference)}), cv2's in order: "
                  f"{same}; {' '.join(map(str, order[:40]))}")  # fmt: skip


if __name__ == "__main__":
    main()
